//! Acquiring a device, and everything built once per device.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::{Arc, Mutex};

use super::forward::Plan;
use super::{shaders, GpuError};

/// A device, its queue and pipelines, and the buffers of the last configuration run.
pub struct GpuContext {
    pub(super) device: wgpu::Device,
    pub(super) queue: wgpu::Queue,
    pub(super) info: wgpu::AdapterInfo,
    pub(super) limits: wgpu::Limits,
    pub(super) matmul: wgpu::ComputePipeline,
    pub(super) matmul_generated: wgpu::ComputePipeline,
    pub(super) attention: wgpu::ComputePipeline,
    /// Set by the device-lost callback or the uncaptured-error handler; checked by every call.
    pub(super) failure: Arc<Mutex<Option<GpuError>>>,
    pub(super) plan: RefCell<Option<Rc<Plan>>>,
    /// Until [`GpuContext::destroy`]: the device counts in [`super::live_devices`].
    open: Cell<bool>,
}

impl GpuContext {
    /// Finds an adapter with compute (WebGPU in the browser, Vulkan/Metal/DX12 natively) and
    /// opens a device with the adapter's own limits.
    pub async fn acquire() -> Result<GpuContext, GpuError> {
        let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
        #[cfg(target_arch = "wasm32")]
        {
            if !wgpu::util::is_browser_webgpu_supported().await {
                return Err(GpuError::NoWebGpu);
            }
            desc.backends = wgpu::Backends::BROWSER_WEBGPU;
        }
        #[cfg(not(target_arch = "wasm32"))]
        {
            desc.backends = wgpu::Backends::PRIMARY;
        }
        let instance = wgpu::Instance::new(desc);
        if super::take_fault(super::Fault::Adapter) {
            return Err(GpuError::NoAdapter("the adapter request was rejected (forced)".into()));
        }
        let adapter = instance
            .request_adapter(&wgpu::RequestAdapterOptions {
                power_preference: wgpu::PowerPreference::HighPerformance,
                ..Default::default()
            })
            .await
            .map_err(|e| GpuError::NoAdapter(e.to_string()))?;
        Self::from_adapter(&adapter).await
    }

    /// Opens a device on `adapter` and builds the pipelines.
    pub async fn from_adapter(adapter: &wgpu::Adapter) -> Result<GpuContext, GpuError> {
        // Ask for what the adapter offers: the default limits (128 MiB bindings) would refuse
        // GPT-2 Large's per-head contributions at long sequences on adapters that have more.
        let limits = adapter.limits();
        // Timestamp queries, where the adapter has them, let the benchmark time each dispatch.
        let features = adapter.features() & wgpu::Features::TIMESTAMP_QUERY;
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("headlab"),
                required_limits: limits.clone(),
                required_features: features,
                ..Default::default()
            })
            .await
            .map_err(|e| GpuError::RequestDevice(e.to_string()))?;

        let failure = Arc::new(Mutex::new(None));
        let on_lost = failure.clone();
        device.set_device_lost_callback(move |reason, message| {
            let why = match reason {
                wgpu::DeviceLostReason::Destroyed => "destroyed".to_string(),
                wgpu::DeviceLostReason::Unknown if message.is_empty() => "no reason given".to_string(),
                wgpu::DeviceLostReason::Unknown => message,
            };
            record(&on_lost, GpuError::DeviceLost(why));
        });
        // Without a handler wgpu panics on errors nobody captured; record them instead.
        let on_error = failure.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            let err = match e {
                wgpu::Error::OutOfMemory { .. } => GpuError::OutOfMemory(e.to_string()),
                _ => GpuError::Internal(e.to_string()),
            };
            record(&on_error, err);
        }));

        let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        let pipeline = |label: &str, source: &str| {
            let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(label),
                source: wgpu::ShaderSource::Wgsl(source.into()),
            });
            device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(label),
                layout: None,
                module: &module,
                entry_point: Some("main"),
                compilation_options: Default::default(),
                cache: None,
            })
        };
        let broken = super::take_fault(super::Fault::Pipeline);
        let matmul = pipeline("matmul", if broken { "this is not WGSL (forced)" } else { shaders::MATMUL });
        let matmul_generated = pipeline("matmul (generated B)", shaders::MATMUL_GENERATED);
        let attention = pipeline("attention", shaders::ATTENTION);
        if let Some(e) = scope.pop().await {
            return Err(GpuError::Internal(format!("pipeline creation failed: {e}")));
        }

        super::count_devices(1);
        Ok(GpuContext {
            device,
            queue,
            info: adapter.get_info(),
            limits,
            matmul,
            matmul_generated,
            attention,
            failure,
            plan: RefCell::new(None),
            open: Cell::new(true),
        })
    }

    /// The adapter's name and backend, e.g. "llvmpipe (LLVM 15.0.6, 256 bits) (Vulkan, software)".
    /// Browsers often withhold the name; then the driver description, or a plain "adapter".
    pub fn adapter_label(&self) -> String {
        let info = &self.info;
        let backend = match info.backend {
            wgpu::Backend::BrowserWebGpu => "browser".to_string(),
            other => format!("{other:?}"),
        };
        let software = info.device_type == wgpu::DeviceType::Cpu;
        match [&info.name, &info.driver_info, &info.driver].into_iter().find(|s| !s.trim().is_empty()) {
            Some(name) if software => format!("{name} ({backend}, software)"),
            Some(name) => format!("{name} ({backend})"),
            None if software => format!("software adapter ({backend})"),
            None => format!("unnamed adapter ({backend})"),
        }
    }

    /// Whether the adapter is a software rasteriser on the CPU (SwiftShader, lavapipe).
    pub fn is_software(&self) -> bool {
        self.info.device_type == wgpu::DeviceType::Cpu
    }

    /// The device's limits as granted.
    pub fn limits(&self) -> &wgpu::Limits {
        &self.limits
    }

    /// Destroys the device, as a driver reset would: every later call fails with
    /// [`GpuError::DeviceLost`]. Used to test and demonstrate the fallback.
    pub fn destroy(&self) {
        self.device.destroy();
        record(&self.failure, GpuError::DeviceLost("destroyed".into()));
        if self.open.replace(false) {
            super::count_devices(-1);
        }
    }

    /// The first failure recorded since the device was opened, if any.
    pub fn failure(&self) -> Option<GpuError> {
        self.failure.lock().ok().and_then(|f| f.clone())
    }
}

impl Drop for GpuContext {
    fn drop(&mut self) {
        if self.open.replace(false) {
            super::count_devices(-1);
        }
    }
}

/// Keeps the first failure: later ones are usually consequences of it.
fn record(slot: &Mutex<Option<GpuError>>, err: GpuError) {
    if let Ok(mut f) = slot.lock() {
        f.get_or_insert(err);
    }
}
