//! Making GPU buffers and bind groups: the one place that does, so that their usages, the
//! dispatch sizes the shaders expect, the buffers' destruction, and a count of everything made
//! (tests check that a steady pass makes nothing) live together.

use std::cell::{Cell, RefCell};

/// Rows and columns of `C` one workgroup of `matmul.wgsl` computes (its `TM` and `TN`).
pub const TILE: u32 = 64;

/// Invocations per workgroup of the element-wise kernels (`bert.wgsl`'s `bias_act`, `mask_heads`,
/// `add_residual`).
pub const ELEMENTWISE_GROUP: u32 = 256;

/// Workgroups of `matmul.wgsl` along a dimension of `extent` rows or columns.
pub fn tiles(extent: usize) -> u32 {
    extent.div_ceil(TILE as usize) as u32
}

/// Workgroups of an element-wise kernel over `count` elements.
pub fn elementwise_groups(count: usize) -> u32 {
    count.div_ceil(ELEMENTWISE_GROUP as usize) as u32
}

thread_local! {
    static MADE: Cell<Made> = const { Cell::new(Made { buffers: 0, bind_groups: 0 }) };
}

/// How many buffers and bind groups this thread has made since it started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Made {
    /// Buffers created.
    pub buffers: u64,
    /// Bind groups created.
    pub bind_groups: u64,
}

/// What this thread has made so far (the page is one thread; each native test is one too).
pub fn made() -> Made {
    MADE.with(Cell::get)
}

fn count(f: impl FnOnce(&mut Made)) {
    MADE.with(|m| {
        let mut made = m.get();
        f(&mut made);
        m.set(made);
    });
}

/// A buffer of `bytes` with `usage`.
pub(crate) fn buffer(
    device: &wgpu::Device,
    label: &str,
    bytes: u64,
    usage: wgpu::BufferUsages,
) -> wgpu::Buffer {
    count(|m| m.buffers += 1);
    device.create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        size: bytes,
        usage,
        mapped_at_creation: false,
    })
}

/// A storage buffer of `bytes`, with `extra` usages.
pub(crate) fn storage(
    device: &wgpu::Device,
    label: &str,
    bytes: u64,
    extra: wgpu::BufferUsages,
) -> wgpu::Buffer {
    buffer(device, label, bytes, wgpu::BufferUsages::STORAGE | extra)
}

/// A storage buffer holding `data`.
pub(crate) fn storage_with(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    label: &str,
    data: &[f32],
) -> wgpu::Buffer {
    let b = storage(device, label, std::mem::size_of_val(data) as u64, wgpu::BufferUsages::COPY_DST);
    queue.write_buffer(&b, 0, bytemuck::cast_slice(data));
    b
}

/// A uniform buffer holding `bytes`.
pub(crate) fn uniform(device: &wgpu::Device, queue: &wgpu::Queue, label: &str, bytes: &[u8]) -> wgpu::Buffer {
    let usage = wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST;
    let b = buffer(device, label, bytes.len() as u64, usage);
    queue.write_buffer(&b, 0, bytes);
    b
}

/// A buffer results are copied into and mapped for reading.
pub(crate) fn readback(device: &wgpu::Device, bytes: u64) -> wgpu::Buffer {
    buffer(device, "readback", bytes, wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST)
}

/// A bind group of `pipeline`'s group 0 with each `(binding, buffer)` bound whole.
pub(crate) fn bind_group(
    device: &wgpu::Device,
    pipeline: &wgpu::ComputePipeline,
    buffers: &[(u32, &wgpu::Buffer)],
) -> wgpu::BindGroup {
    count(|m| m.bind_groups += 1);
    let entries: Vec<wgpu::BindGroupEntry> = buffers
        .iter()
        .map(|&(binding, b)| wgpu::BindGroupEntry { binding, resource: b.as_entire_binding() })
        .collect();
    device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: None,
        layout: &pipeline.get_bind_group_layout(0),
        entries: &entries,
    })
}

/// [`bind_group`] with `buffers` at bindings 0, 1, 2... in the order given.
pub(crate) fn bind_in_order(
    device: &wgpu::Device,
    pipeline: &wgpu::ComputePipeline,
    buffers: &[&wgpu::Buffer],
) -> wgpu::BindGroup {
    let numbered: Vec<(u32, &wgpu::Buffer)> =
        buffers.iter().enumerate().map(|(i, &b)| (i as u32, b)).collect();
    bind_group(device, pipeline, &numbered)
}

/// Buffers made for one job (a configuration's plan, a sequence length's plan, one pass),
/// destroyed when it is dropped. wgpu's web backend does not destroy a buffer on drop: the
/// browser would free its GPU memory only when JavaScript's garbage collector found the handle,
/// so memory would climb with every pass and preset switch until then.
#[derive(Default)]
pub(crate) struct Owned(RefCell<Vec<wgpu::Buffer>>);

impl Owned {
    /// Keeps `buffer` to destroy with the job, and returns it.
    pub(crate) fn keep(&self, buffer: wgpu::Buffer) -> wgpu::Buffer {
        self.0.borrow_mut().push(buffer.clone());
        buffer
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        for buffer in self.0.get_mut().drain(..) {
            buffer.destroy();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dispatch_sizes_cover_every_element() {
        assert_eq!((tiles(1), tiles(64), tiles(65), tiles(1152)), (1, 1, 2, 18));
        assert_eq!((elementwise_groups(1), elementwise_groups(256), elementwise_groups(257)), (1, 1, 2));
    }

    #[test]
    fn the_tile_size_is_the_shaders_own() {
        for line in [format!("const TM: u32 = {TILE}u;"), format!("const TN: u32 = {TILE}u;")] {
            assert!(super::super::shaders::MATMUL.contains(&line), "matmul.wgsl must declare `{line}`");
        }
        let group = format!("@workgroup_size({ELEMENTWISE_GROUP}, 1, 1)");
        assert_eq!(
            super::super::shaders::BERT.matches(&group).count(),
            3,
            "bias_act, mask_heads, add_residual"
        );
    }
}
