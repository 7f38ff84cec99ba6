// Batched, strided matrix product: for every batch index z,
//
//   C_z = alpha * A_z @ B_z        A_z: m x k, B_z: k x n, C_z: m x n
//
// Element (i, j) of A_z is a[a_off + z * a_bs + i * a_rs + j * a_cs] (likewise B); C is written
// row-major with row stride c_rs. Strides let one dispatch take every head's Q, K^T or V as a
// view of the packed QKV matrix, exactly as the CPU kernel does (src/cpu/mod.rs).
//
// Tiling: a 16 x 16 workgroup computes a 64 x 64 block of C, each invocation a 4 x 4 sub-block
// held in registers. A and B are staged through workgroup memory 16 columns of k at a time
// (8 KiB); loads outside the matrices read 0 and stores outside are skipped, so any m, n, k work.
//
// `load_b` (and B's binding) come from one of two prefixes: matmul_stored_b.wgsl reads B from a
// buffer; matmul_generated_b.wgsl computes each element from the weight generator's seed.

struct Params {
    m: u32, n: u32, k: u32, batch: u32,
    a_off: u32, a_rs: u32, a_cs: u32, a_bs: u32,
    b_off: u32, b_rs: u32, b_cs: u32, b_bs: u32,
    c_off: u32, c_rs: u32, c_bs: u32, alpha: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(3) var<storage, read_write> c: array<f32>;

const TM: u32 = 64u;
const TN: u32 = 64u;
const TK: u32 = 16u;
const THREADS: u32 = 256u;

// k-major tiles: a_tile[kk][r] and b_tile[kk][col], so the inner loop reads 4 consecutive floats.
var<workgroup> a_tile: array<vec4<f32>, 256>; // TK x TM / 4
var<workgroup> b_tile: array<vec4<f32>, 256>; // TK x TN / 4

fn load_a(base: u32, row: u32, col: u32) -> f32 {
    if (row < p.m && col < p.k) {
        return a[base + row * p.a_rs + col * p.a_cs];
    }
    return 0.0;
}

@compute @workgroup_size(16, 16, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let z = wg.z;
    let row0 = wg.y * TM;
    let col0 = wg.x * TN;
    let tid = lid.y * 16u + lid.x;
    let a_base = p.a_off + z * p.a_bs;
    let b_base = p.b_off + z * p.b_bs;

    var acc = array<vec4<f32>, 4>(vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0));
    for (var k0 = 0u; k0 < p.k; k0 = k0 + TK) {
        // Each invocation stages one vec4 of each tile: A rows r..r+3 at column kk (consecutive
        // invocations walk k, which is contiguous when a_cs == 1), and B columns q..q+3 at row kk.
        let kk_a = tid % TK;
        let r = (tid / TK) * 4u;
        a_tile[kk_a * (TM / 4u) + r / 4u] = vec4<f32>(
            load_a(a_base, row0 + r, k0 + kk_a),
            load_a(a_base, row0 + r + 1u, k0 + kk_a),
            load_a(a_base, row0 + r + 2u, k0 + kk_a),
            load_a(a_base, row0 + r + 3u, k0 + kk_a),
        );
        let kk_b = tid / (TN / 4u);
        let q = (tid % (TN / 4u)) * 4u;
        b_tile[kk_b * (TN / 4u) + q / 4u] = vec4<f32>(
            load_b(b_base, k0 + kk_b, col0 + q),
            load_b(b_base, k0 + kk_b, col0 + q + 1u),
            load_b(b_base, k0 + kk_b, col0 + q + 2u),
            load_b(b_base, k0 + kk_b, col0 + q + 3u),
        );
        workgroupBarrier();
        for (var kk = 0u; kk < TK; kk = kk + 1u) {
            let av = a_tile[kk * (TM / 4u) + lid.y];
            let bv = b_tile[kk * (TN / 4u) + lid.x];
            acc[0] = fma(vec4<f32>(av.x), bv, acc[0]);
            acc[1] = fma(vec4<f32>(av.y), bv, acc[1]);
            acc[2] = fma(vec4<f32>(av.z), bv, acc[2]);
            acc[3] = fma(vec4<f32>(av.w), bv, acc[3]);
        }
        workgroupBarrier();
    }

    let c_base = p.c_off + z * p.c_bs;
    for (var i = 0u; i < 4u; i = i + 1u) {
        let row = row0 + lid.y * 4u + i;
        for (var j = 0u; j < 4u; j = j + 1u) {
            let col = col0 + lid.x * 4u + j;
            if (row < p.m && col < p.n) {
                c[c_base + row * p.c_rs + col] = p.alpha * acc[i][j];
            }
        }
    }
}
