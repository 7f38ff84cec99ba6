// Fused per-head attention. One workgroup per (query i, head h):
//
//   s_j   = (Q_h[i] . K_h[j]) * scale                 j = 0..n   (scale = 1 / sqrt(d_k))
//   P_h[i][j] = exp(s_j - max s) / sum_l exp(s_l - max s)   (max-subtracted softmax)
//   O_h[i][c] = sum_j P_h[i][j] V_h[j][c]            c = 0..d_k
//
// Q, K and V are read from the packed QKV matrix (n x 3d, columns [Q | K | V], heads of d_k).
// P is written to attn (H x n x n, for the heatmaps) and O into head h's columns of the
// concatenation heads (n x d). The score row lives in workgroup memory, so n <= MAX_SEQ.
//
// Causal (a decoder's): query i reads keys 0..=i only; P_h[i][j] = 0 for j > i, written as such.

struct Params {
    n: u32,
    d: u32,
    d_k: u32,
    heads: u32,
    scale: f32,
    // The first head this dispatch computes: 0 for all heads at once; h for head h alone (the
    // code walk's loop over heads).
    head0: u32,
    // 1: a decoder's causal mask; 0: every query reads every key.
    causal: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> qkv: array<f32>;
@group(0) @binding(2) var<storage, read_write> attn: array<f32>;
@group(0) @binding(3) var<storage, read_write> heads: array<f32>;

const MAX_SEQ: u32 = 1024u; // = attention::config::MAX_SEQ_LEN (checked by a test)
const WG: u32 = 64u;

var<workgroup> row: array<f32, MAX_SEQ>;
var<workgroup> red: array<f32, WG>;

// Tree reduction of red[0..WG] into red[0]; op 0 = max, 1 = sum. Called in uniform control flow.
fn reduce(lid: u32, op: u32) {
    for (var s = WG / 2u; s > 0u; s = s / 2u) {
        workgroupBarrier();
        if (lid < s) {
            if (op == 0u) {
                red[lid] = max(red[lid], red[lid + s]);
            } else {
                red[lid] = red[lid] + red[lid + s];
            }
        }
    }
    workgroupBarrier();
}

@compute @workgroup_size(64, 1, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = wg.x;
    let h = wg.y + p.head0;
    let stride = 3u * p.d;
    let q_base = i * stride + h * p.d_k;
    let k_off = p.d + h * p.d_k;
    let v_off = 2u * p.d + h * p.d_k;

    // The keys query i reads: all of them, or (causal) 0..=i. A key past them scores -3e38, which
    // the softmax turns into an exact 0.
    let visible = select(p.n, i + 1u, p.causal == 1u);

    // Scores, and each invocation's running max.
    var m = -3.0e38;
    for (var j = lid; j < p.n; j = j + WG) {
        var s = -3.0e38;
        if (j < visible) {
            let k_base = j * stride + k_off;
            s = 0.0;
            for (var c = 0u; c < p.d_k; c = c + 1u) {
                s = fma(qkv[q_base + c], qkv[k_base + c], s);
            }
            s = s * p.scale;
        }
        row[j] = s;
        m = max(m, s);
    }
    red[lid] = m;
    reduce(lid, 0u);
    let row_max = red[0];
    workgroupBarrier();

    var sum = 0.0;
    for (var j = lid; j < p.n; j = j + WG) {
        let e = exp(row[j] - row_max);
        row[j] = e;
        sum = sum + e;
    }
    red[lid] = sum;
    reduce(lid, 1u);
    let inv = 1.0 / red[0];

    let p_base = (h * p.n + i) * p.n;
    for (var j = lid; j < p.n; j = j + WG) {
        let w = row[j] * inv;
        row[j] = w;
        attn[p_base + j] = w;
    }
    workgroupBarrier();

    for (var c = lid; c < p.d_k; c = c + WG) {
        var o = 0.0;
        for (var j = 0u; j < visible; j = j + 1u) {
            o = fma(row[j], qkv[j * stride + v_off + c], o);
        }
        heads[i * p.d + h * p.d_k + c] = o;
    }
}
