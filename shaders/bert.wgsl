// The trained model's layer pieces that are not matrix products (those use matmul.wgsl):
//
//   bias_act:       y[r][c] = act(y[r][c] + bias[c])        act = identity, GELU, or tanh GELU
//   residual_norm:  x[r] = LayerNorm(x[r] + y[r] + bias) * w + b      (one workgroup per row)
//   mask_heads:     heads[r][h*d_k + c] = 0 for every head h whose flag is 0 (pruned)
//
// and a decoder's (GPT-2 normalises before each branch and adds the branch after):
//
//   layer_norm:     y[r] = LayerNorm(x[r]) * w + b                    (one workgroup per row)
//   add_residual:   x[r][c] = x[r][c] + y[r][c] + bias[c]
//   row_loss:       x[row0 + r] = logsumexp(y[r]) - y[r][ids[row0 + r + 1]]   (one workgroup per
//                   row of a block of logits: the loss of each position's next token)
//
// Each entry point binds its own buffers and reads the fields of `p` it needs.

struct Params {
    rows: u32,
    cols: u32,
    gelu: u32,       // bias_act: 1 applies GELU after the bias, 2 its tanh approximation
    head_width: u32, // mask_heads: columns per head (d_k)
    eps: f32,        // residual_norm, layer_norm: LayerNorm's epsilon
    row0: u32,       // row_loss: the block's first row within the text
    seq: u32,        // row_loss: the text's tokens
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<storage, read> bias: array<f32>;

// erf by Abramowitz and Stegun 7.1.26 (absolute error below 1.5e-7): WGSL has no erf.
fn erf(x: f32) -> f32 {
    let s = sign(x);
    let a = abs(x);
    let t = 1.0 / (1.0 + 0.3275911 * a);
    let poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
    return s * (1.0 - poly * exp(-a * a));
}

@compute @workgroup_size(256, 1, 1)
fn bias_act(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i >= p.rows * p.cols) {
        return;
    }
    var v = y[i] + bias[i % p.cols];
    if (p.gelu == 1u) {
        v = 0.5 * v * (1.0 + erf(v * 0.70710678118654752));
    } else if (p.gelu == 2u) {
        // tanh is 1 in f32 beyond |u| = 9; clamped, no implementation sees a huge argument.
        let u = clamp(0.7978845608 * (v + 0.044715 * v * v * v), -9.0, 9.0);
        v = 0.5 * v * (1.0 + tanh(u));
    }
    y[i] = v;
}

// residual_norm's own bindings: x (read_write), y (the branch output), bias, then w and b.
@group(0) @binding(3) var<storage, read_write> x: array<f32>;
@group(0) @binding(4) var<storage, read> ln: array<f32>; // [w (cols) | b (cols)]

const NORM_WG: u32 = 128u;
var<workgroup> red: array<f32, NORM_WG>;

fn reduce_sum(lid: u32) -> f32 {
    for (var s = NORM_WG / 2u; s > 0u; s = s / 2u) {
        workgroupBarrier();
        if (lid < s) {
            red[lid] = red[lid] + red[lid + s];
        }
    }
    workgroupBarrier();
    let total = red[0];
    workgroupBarrier();
    return total;
}

// The mean of x's row at `base` (whose elements' sum this invocation holds as `sum`) and the
// inverse of its standard deviation (with LayerNorm's epsilon). Called in uniform control flow.
fn row_stats(base: u32, lid: u32, sum: f32) -> vec2<f32> {
    red[lid] = sum;
    let mean = reduce_sum(lid) / f32(p.cols);
    var sq = 0.0;
    for (var c = lid; c < p.cols; c = c + NORM_WG) {
        let d = x[base + c] - mean;
        sq = sq + d * d;
    }
    red[lid] = sq;
    return vec2<f32>(mean, inverseSqrt(reduce_sum(lid) / f32(p.cols) + p.eps));
}

@compute @workgroup_size(128, 1, 1)
fn residual_norm(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let base = wg.x * p.cols;
    var sum = 0.0;
    for (var c = lid; c < p.cols; c = c + NORM_WG) {
        let v = x[base + c] + y[base + c] + bias[c];
        x[base + c] = v;
        sum = sum + v;
    }
    let s = row_stats(base, lid, sum);
    for (var c = lid; c < p.cols; c = c + NORM_WG) {
        x[base + c] = (x[base + c] - s.x) * s.y * ln[c] + ln[p.cols + c];
    }
}

// mask_heads: bias holds one flag per head (1.0 = active, 0.0 = pruned).
@compute @workgroup_size(256, 1, 1)
fn mask_heads(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i >= p.rows * p.cols) {
        return;
    }
    let head = (i % p.cols) / p.head_width;
    if (bias[head] < 0.5) {
        y[i] = 0.0;
    }
}

// layer_norm: y = LayerNorm(x) (x is only read).
@compute @workgroup_size(128, 1, 1)
fn layer_norm(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let base = wg.x * p.cols;
    var sum = 0.0;
    for (var c = lid; c < p.cols; c = c + NORM_WG) {
        sum = sum + x[base + c];
    }
    let s = row_stats(base, lid, sum);
    for (var c = lid; c < p.cols; c = c + NORM_WG) {
        y[base + c] = (x[base + c] - s.x) * s.y * ln[c] + ln[p.cols + c];
    }
}

// add_residual: x += y + bias (the branch and its bias).
@compute @workgroup_size(256, 1, 1)
fn add_residual(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i >= p.rows * p.cols) {
        return;
    }
    x[i] = x[i] + y[i] + bias[i % p.cols];
}

fn reduce_max(lid: u32) -> f32 {
    for (var s = NORM_WG / 2u; s > 0u; s = s / 2u) {
        workgroupBarrier();
        if (lid < s) {
            red[lid] = max(red[lid], red[lid + s]);
        }
    }
    workgroupBarrier();
    let top = red[0];
    workgroupBarrier();
    return top;
}

// row_loss: y holds rows row0.. of the logits (p.cols = the vocabulary), bias the text's ids (as
// f32: exact below 2^24), x receives each position's loss; the last position has none.
@compute @workgroup_size(128, 1, 1)
fn row_loss(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let t = p.row0 + wg.x;
    if (t + 1u >= p.seq) {
        return;
    }
    let base = wg.x * p.cols;
    var m = -3.0e38;
    for (var c = lid; c < p.cols; c = c + NORM_WG) {
        m = max(m, y[base + c]);
    }
    red[lid] = m;
    let top = reduce_max(lid);
    var sum = 0.0;
    for (var c = lid; c < p.cols; c = c + NORM_WG) {
        sum = sum + exp(y[base + c] - top);
    }
    red[lid] = sum;
    let total = reduce_sum(lid);
    if (lid == 0u) {
        x[t] = top + log(total) - y[base + u32(bias[t + 1u])];
    }
}
