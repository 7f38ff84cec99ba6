// B generated, not stored: the prefix of matmul.wgsl for weights too large to keep (GPT-3's
// 2.25 GiB). Element i of the flat matrix is bound * symmetric(i) of the counter-based generator
// in src/attention/synthetic.rs (Stream::bits, Stream::symmetric), bit for bit: the hash is
// integer arithmetic, f32(bits >> 8) is exact, and 2u - 1 and the final product round as on
// the CPU.

struct Generator {
    k1: u32,
    k2: u32,
    bound: f32,
    _pad: u32,
}

@group(0) @binding(4) var<uniform> gen: Generator;

// lowbias32 (C. Wellons), as synthetic::hash32.
fn hash32(v: u32) -> u32 {
    var x = v;
    x = x ^ (x >> 16u);
    x = x * 0x7feb352du;
    x = x ^ (x >> 15u);
    x = x * 0x846ca68bu;
    x = x ^ (x >> 16u);
    return x;
}

fn load_b(base: u32, row: u32, col: u32) -> f32 {
    if (row < p.k && col < p.n) {
        let i = base + row * p.b_rs + col * p.b_cs;
        let bits = hash32(hash32(i ^ gen.k1) ^ gen.k2);
        let u = (f32(bits >> 8u) + 0.5) * (1.0 / 16777216.0);
        return gen.bound * (2.0 * u - 1.0);
    }
    return 0.0;
}
