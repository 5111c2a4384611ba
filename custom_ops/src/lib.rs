//! libhexfuse_ort.so: the ONNX Runtime custom-op library for `hexfuse::FusedHexPair`.
//!
//! ONNX Runtime loads it with `SessionOptions.register_custom_ops_library` and calls
//! `RegisterCustomOps`, which registers the domain `hexfuse` with one CPU op, `FusedHexPair`
//! (since version 1): variadic inputs of any tensor types (weights and int64 shape tensors are
//! inputs too), variadic float32 outputs. Each node's kernel parses its `program` attribute once
//! and runs both tasks on its backend (backend.rs): `host`, one process-wide persistent worker
//! pool of the dsp/ kernel linked in statically, or `hexagon`, the same kernel on the cDSP
//! through FastRPC (hexagon.rs, fastrpc_client.c). See docs/DESIGN.md, "The FusedHexPair contract".
//!
//! Environment: `HEXFUSE_BACKEND` (auto | host | hexagon, default auto; read at kernel creation,
//! i.e. when a session is created), `HEXFUSE_CDSPRPC_LIB` (the FastRPC library, default
//! libcdsprpc.so), `HEXFUSE_WORKERS` (vector workers of the host pool) and `HEXFUSE_PIN` (0: do
//! not bind each worker to its own CPU; default 1), both read when the pool is created by the
//! first kernel, `HEXFUSE_TRACE` (a JSON trace file rewritten after every run;
//! read at kernel creation) and `HEXFUSE_SCHEDULE` (adaptive | fused | serial: how host calls run
//! their two tasks, schedule.rs; read at kernel creation).
//!
//! No panic crosses the C boundary: every entry point runs under `catch_unwind` and turns a
//! panic into an ORT_FAIL status (or a harmless default where the C signature has no status).

mod backend;
mod hexagon;
mod hfx;
mod kernel;
mod ort;
mod schedule;
mod shares;
mod specialized;
mod trace;

use std::ffi::{c_char, c_int, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicPtr, Ordering};

use ort_sys::{
    ONNXTensorElementDataType, OrtApi, OrtApiBase, OrtCustomOp, OrtCustomOpDomain,
    OrtCustomOpInputOutputCharacteristic, OrtKernelContext, OrtKernelInfo, OrtMemType, OrtSessionOptions, OrtStatusPtr,
};

use crate::kernel::{Kernel, DOMAIN, OP_TYPE};

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        String::from("unknown panic")
    }
}

/// Runs `f` and returns its error, or a caught panic, as an OrtStatus (null on success).
fn status_of(what: &str, f: impl FnOnce() -> ort::Result<()>) -> OrtStatusPtr {
    let err = match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => return OrtStatusPtr::default(),
        Ok(Err(e)) => e,
        Err(p) => ort::fail(format!("hexfuse plugin: internal error in {what}: {}", panic_message(&*p))),
    };
    let api = API_FOR_ERRORS.load(Ordering::Acquire);
    if api.is_null() {
        // Unreachable in practice (ORT calls RegisterCustomOps first); never unwind into C.
        eprintln!("{}", err.message);
        return OrtStatusPtr::default();
    }
    // SAFETY: set from ONNX Runtime's API table, which lives as long as the process.
    ort::to_status(unsafe { &*api }, &err)
}

/// `f()`, or `default` if it panics (for the callbacks whose C signature returns a plain value).
fn value_of<T>(default: T, f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(default)
}

/// The API table used to create error statuses: the full one, or version 1's when the runtime
/// is too old for this plugin (CreateStatus exists in every version).
static API_FOR_ERRORS: AtomicPtr<OrtApi> = AtomicPtr::new(std::ptr::null_mut());

// ---- the custom op ------------------------------------------------------------------------

const CPU_EP: &CStr = c"CPUExecutionProvider";

unsafe extern "system" fn get_name(_: *const OrtCustomOp) -> *const c_char {
    OP_TYPE.as_ptr()
}

unsafe extern "system" fn get_ep(_: *const OrtCustomOp) -> *const c_char {
    CPU_EP.as_ptr()
}

unsafe extern "system" fn one(_: *const OrtCustomOp) -> usize {
    1
}

unsafe extern "system" fn input_type(_: *const OrtCustomOp, _: usize) -> ONNXTensorElementDataType {
    // Any tensor type: float activations and weights, int64 shape tensors (see lower.py).
    ONNXTensorElementDataType::ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED
}

unsafe extern "system" fn output_type(_: *const OrtCustomOp, _: usize) -> ONNXTensorElementDataType {
    // Any tensor type: float, and the integer outputs of QuantizeLinear in QDQ pairs. ONNX Runtime
    // takes each output's type from the model (the pass writes a value_info for every output of a
    // FusedHexPair node); the kernel checks it against the program.
    ONNXTensorElementDataType::ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED
}

unsafe extern "system" fn variadic(_: *const OrtCustomOp, _: usize) -> OrtCustomOpInputOutputCharacteristic {
    OrtCustomOpInputOutputCharacteristic::INPUT_OUTPUT_VARIADIC
}

unsafe extern "system" fn memory_type(_: *const OrtCustomOp, _: usize) -> OrtMemType {
    OrtMemType::OrtMemTypeDefault
}

unsafe extern "system" fn min_arity(_: *const OrtCustomOp) -> c_int {
    1
}

unsafe extern "system" fn heterogeneous(_: *const OrtCustomOp) -> c_int {
    0
}

unsafe extern "system" fn homogeneous(_: *const OrtCustomOp) -> c_int {
    1
}

unsafe extern "system" fn since_version(_: *const OrtCustomOp) -> c_int {
    1
}

unsafe extern "system" fn create_kernel(
    _: *const OrtCustomOp,
    api: *const OrtApi,
    info: *const OrtKernelInfo,
    out: *mut *mut c_void,
) -> OrtStatusPtr {
    status_of("CreateKernel", || {
        if out.is_null() || info.is_null() {
            return Err(ort::fail("hexfuse plugin: CreateKernel called without a kernel info"));
        }
        // SAFETY: out is ORT's out-parameter.
        unsafe { *out = std::ptr::null_mut() };
        if !api.is_null() {
            ort::set_api(api);
        }
        let k = Kernel::create(info)?;
        // SAFETY: ownership passes to ORT until KernelDestroy.
        unsafe { *out = Box::into_raw(Box::new(k)).cast() };
        Ok(())
    })
}

unsafe extern "system" fn compute(kernel: *mut c_void, ctx: *mut OrtKernelContext) -> OrtStatusPtr {
    status_of("KernelCompute", || {
        if kernel.is_null() {
            return Err(ort::fail("hexfuse plugin: KernelCompute called without a kernel"));
        }
        // SAFETY: a kernel from create_kernel, alive until KernelDestroy; shared read-only.
        let k = unsafe { &*(kernel as *const Kernel) };
        k.compute(ctx)
    })
}

unsafe extern "system" fn destroy(kernel: *mut c_void) {
    value_of((), || {
        if !kernel.is_null() {
            // SAFETY: from Box::into_raw in create_kernel; ORT destroys each kernel once.
            drop(unsafe { Box::from_raw(kernel as *mut Kernel) });
        }
    })
}

/// Version 17 of the struct: variadic I/O (>= 14), CreateKernelV2/KernelComputeV2 (>= 16),
/// GetStartVersion/GetEndVersion and InferOutputShapeFn (>= 17). ORT reads no field beyond it.
static FUSED_HEX_PAIR: OrtCustomOp = OrtCustomOp {
    version: ort::API_VERSION,
    CreateKernel: None, // ORT uses CreateKernelV2 for version >= 16
    GetName: Some(get_name),
    GetExecutionProviderType: Some(get_ep),
    GetInputType: Some(input_type),
    GetInputTypeCount: Some(one),
    GetOutputType: Some(output_type),
    GetOutputTypeCount: Some(one),
    KernelCompute: None, // KernelComputeV2 instead (returns a status)
    KernelDestroy: Some(destroy),
    GetInputCharacteristic: Some(variadic),
    GetOutputCharacteristic: Some(variadic),
    GetInputMemoryType: Some(memory_type),
    GetVariadicInputMinArity: Some(min_arity),
    GetVariadicInputHomogeneity: Some(heterogeneous),
    GetVariadicOutputMinArity: Some(min_arity),
    GetVariadicOutputHomogeneity: Some(homogeneous),
    CreateKernelV2: Some(create_kernel),
    KernelComputeV2: Some(compute),
    InferOutputShapeFn: None, // output types come from the schema (float); shapes from the model
    GetStartVersion: Some(since_version),
    GetEndVersion: Some(since_version),
};

/// One domain for the process: ONNX Runtime requires it to outlive every session using it.
static DOMAIN_HANDLE: AtomicPtr<OrtCustomOpDomain> = AtomicPtr::new(std::ptr::null_mut());

fn domain(api: &OrtApi) -> ort::Result<*mut OrtCustomOpDomain> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let d = DOMAIN_HANDLE.load(Ordering::Acquire);
    if !d.is_null() {
        return Ok(d);
    }
    let mut d: *mut OrtCustomOpDomain = std::ptr::null_mut();
    // SAFETY: API calls with valid arguments; the op is a static.
    unsafe {
        ort::check((api.CreateCustomOpDomain)(DOMAIN.as_ptr(), &mut d)).map_err(ort::fail)?;
        if let Err(m) = ort::check((api.CustomOpDomain_Add)(d, &FUSED_HEX_PAIR)) {
            (api.ReleaseCustomOpDomain)(d);
            return Err(ort::fail(m));
        }
    }
    DOMAIN_HANDLE.store(d, Ordering::Release);
    Ok(d)
}

/// The entry point ONNX Runtime looks up after loading the library.
///
/// # Safety
/// Called by ONNX Runtime with valid session options and its API base.
#[no_mangle]
pub unsafe extern "C" fn RegisterCustomOps(
    options: *mut OrtSessionOptions,
    api_base: *const OrtApiBase,
) -> OrtStatusPtr {
    if api_base.is_null() {
        eprintln!("hexfuse plugin: RegisterCustomOps called without an OrtApiBase");
        return OrtStatusPtr::default();
    }
    // SAFETY: ORT's API base is valid for the life of the process.
    let base = unsafe { &*api_base };
    let api = value_of(std::ptr::null(), || unsafe { (base.GetApi)(ort::API_VERSION) });
    if api.is_null() {
        // Too old a runtime for this plugin: report through version 1 of the API.
        let v1 = value_of(std::ptr::null(), || unsafe { (base.GetApi)(1) });
        API_FOR_ERRORS.store(v1 as *mut OrtApi, Ordering::Release);
        return status_of("RegisterCustomOps", || {
            let have = unsafe { CStr::from_ptr((base.GetVersionString)()) }.to_string_lossy().into_owned();
            Err(ort::fail(format!(
                "hexfuse plugin: ONNX Runtime {have} does not serve OrtApi version {} (ONNX Runtime 1.{} or newer is needed)",
                ort::API_VERSION,
                ort::API_VERSION
            )))
        });
    }
    API_FOR_ERRORS.store(api as *mut OrtApi, Ordering::Release);
    ort::set_api(api);
    status_of("RegisterCustomOps", || {
        hfx::check_abi().map_err(ort::fail)?;
        hexagon::check_abi().map_err(ort::fail)?;
        // SAFETY: a valid API table.
        let api = unsafe { &*api };
        let d = domain(api)?;
        // SAFETY: options from ORT; the domain lives for the process.
        unsafe { ort::check((api.AddCustomOpDomain)(options, d)) }.map_err(ort::fail)
    })
}
