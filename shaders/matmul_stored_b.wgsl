// B read from a storage buffer: the prefix of matmul.wgsl for stored matrices.

@group(0) @binding(2) var<storage, read> b: array<f32>;

fn load_b(base: u32, row: u32, col: u32) -> f32 {
    if (row < p.k && col < p.n) {
        return b[base + row * p.b_rs + col * p.b_cs];
    }
    return 0.0;
}
