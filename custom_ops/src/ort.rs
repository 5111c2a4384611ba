//! ONNX Runtime's C API as received through RegisterCustomOps: the OrtApi table, statuses,
//! and the few KernelInfo / KernelContext / tensor calls the kernel needs, as Result-returning
//! helpers. Every OrtStatus from ONNX Runtime is released here.

use std::ffi::{c_char, c_void, CStr, CString};
use std::sync::atomic::{AtomicPtr, Ordering};

use ort_sys::{
    OrtApi, OrtErrorCode, OrtKernelContext, OrtKernelInfo, OrtStatusPtr, OrtTensorTypeAndShapeInfo, OrtValue,
};

/// The OrtApi version this plugin is written against (ort-sys feature api-17). ONNX Runtime
/// returns the table for any version up to its own, and the table only grows.
pub const API_VERSION: u32 = ort_sys::ORT_API_VERSION;

static API: AtomicPtr<OrtApi> = AtomicPtr::new(std::ptr::null_mut());

pub fn set_api(api: *const OrtApi) {
    API.store(api as *mut OrtApi, Ordering::Release);
}

/// The OrtApi. Only called after RegisterCustomOps stored it (kernels exist only after that).
pub fn api() -> &'static OrtApi {
    let p = API.load(Ordering::Acquire);
    assert!(!p.is_null(), "hexfuse plugin: the OrtApi is not set (RegisterCustomOps was not called)");
    // SAFETY: ONNX Runtime's API table is static for the life of the process.
    unsafe { &*p }
}

/// An error to hand back to ONNX Runtime as an OrtStatus.
#[derive(Debug)]
pub struct Error {
    pub code: OrtErrorCode,
    pub message: String,
}

pub type Result<T> = std::result::Result<T, Error>;

pub fn fail(message: impl Into<String>) -> Error {
    Error { code: OrtErrorCode::ORT_FAIL, message: message.into() }
}

pub fn invalid(message: impl Into<String>) -> Error {
    Error { code: OrtErrorCode::ORT_INVALID_ARGUMENT, message: message.into() }
}

/// A new OrtStatus carrying `e` (ownership passes to ONNX Runtime).
pub fn to_status(api: &OrtApi, e: &Error) -> OrtStatusPtr {
    let msg = CString::new(e.message.replace('\0', " ")).unwrap_or_default();
    // SAFETY: CreateStatus copies the message.
    unsafe { (api.CreateStatus)(e.code, msg.as_ptr()) }
}

/// Ok for a null status; else the status' message (the status is released).
pub fn check(st: OrtStatusPtr) -> std::result::Result<(), String> {
    if st.0.is_null() {
        return Ok(());
    }
    let api = api();
    // SAFETY: a status returned by ONNX Runtime; read its message, then release it once.
    unsafe {
        let p = (api.GetErrorMessage)(st.0);
        let msg =
            if p.is_null() { String::from("unknown error") } else { CStr::from_ptr(p).to_string_lossy().into_owned() };
        (api.ReleaseStatus)(st.0);
        Err(msg)
    }
}

fn ort(what: &str, st: OrtStatusPtr) -> Result<()> {
    check(st).map_err(|m| fail(format!("{what}: {m}")))
}

// ---- KernelInfo ---------------------------------------------------------------------------

pub fn node_name(info: *const OrtKernelInfo) -> String {
    let api = api();
    let mut size = 0usize;
    // SAFETY: size query, then a buffer of that size.
    unsafe {
        if check((api.KernelInfo_GetNodeName)(info, std::ptr::null_mut(), &mut size)).is_err() || size == 0 {
            return String::new();
        }
        let mut buf = vec![0u8; size];
        if check((api.KernelInfo_GetNodeName)(info, buf.as_mut_ptr().cast::<c_char>(), &mut size)).is_err() {
            return String::new();
        }
        CStr::from_bytes_until_nul(&buf).map(|c| c.to_string_lossy().into_owned()).unwrap_or_default()
    }
}

/// A float attribute; None when the node does not have it.
pub fn attr_f32(info: *const OrtKernelInfo, name: &CStr) -> Option<f32> {
    let mut v = 0f32;
    // SAFETY: plain out-parameter.
    check(unsafe { (api().KernelInfoGetAttribute_float)(info, name.as_ptr(), &mut v) }).ok().map(|_| v)
}

/// An integer attribute; None when the node does not have it.
pub fn attr_i64(info: *const OrtKernelInfo, name: &CStr) -> Option<i64> {
    let mut v = 0i64;
    // SAFETY: plain out-parameter.
    check(unsafe { (api().KernelInfoGetAttribute_int64)(info, name.as_ptr(), &mut v) }).ok().map(|_| v)
}

/// A float array attribute; None when the node does not have it (as floats).
pub fn attr_f32s(info: *const OrtKernelInfo, name: &CStr) -> Option<Vec<f32>> {
    let get = api().KernelInfoGetAttributeArray_float;
    let mut size = 0usize;
    // SAFETY: size query with a null buffer, then a buffer of that size.
    unsafe {
        check(get(info, name.as_ptr(), std::ptr::null_mut(), &mut size)).ok()?;
        let mut v = vec![0f32; size];
        check(get(info, name.as_ptr(), v.as_mut_ptr(), &mut size)).ok()?;
        v.truncate(size);
        Some(v)
    }
}

/// An integer array attribute; None when the node does not have it (as integers).
pub fn attr_i64s(info: *const OrtKernelInfo, name: &CStr) -> Option<Vec<i64>> {
    let get = api().KernelInfoGetAttributeArray_int64;
    let mut size = 0usize;
    // SAFETY: size query with a null buffer, then a buffer of that size.
    unsafe {
        check(get(info, name.as_ptr(), std::ptr::null_mut(), &mut size)).ok()?;
        let mut v = vec![0i64; size];
        check(get(info, name.as_ptr(), v.as_mut_ptr(), &mut size)).ok()?;
        v.truncate(size);
        Some(v)
    }
}

/// A string attribute's raw bytes (ONNX string attributes are bytes; NULs are kept).
/// Err(message) when the node does not have it as a string.
pub fn attr_bytes(info: *const OrtKernelInfo, name: &CStr) -> std::result::Result<Vec<u8>, String> {
    let api = api();
    let mut size = 0usize;
    // SAFETY: size query (size includes a terminating NUL), then a buffer of that size;
    // ONNX Runtime memcpy's the value, so embedded NULs survive.
    unsafe {
        check((api.KernelInfoGetAttribute_string)(info, name.as_ptr(), std::ptr::null_mut(), &mut size))?;
        let mut buf = vec![0u8; size.max(1)];
        let mut got = buf.len();
        check((api.KernelInfoGetAttribute_string)(info, name.as_ptr(), buf.as_mut_ptr().cast::<c_char>(), &mut got))?;
        buf.truncate(got.saturating_sub(1)); // drop the terminating NUL
        Ok(buf)
    }
}

pub fn info_input_count(info: *const OrtKernelInfo) -> Result<usize> {
    let mut n = 0usize;
    ort("KernelInfo_GetInputCount", unsafe { (api().KernelInfo_GetInputCount)(info, &mut n) })?;
    Ok(n)
}

pub fn info_output_count(info: *const OrtKernelInfo) -> Result<usize> {
    let mut n = 0usize;
    ort("KernelInfo_GetOutputCount", unsafe { (api().KernelInfo_GetOutputCount)(info, &mut n) })?;
    Ok(n)
}

// ---- KernelContext ------------------------------------------------------------------------

pub fn input_count(ctx: *mut OrtKernelContext) -> Result<usize> {
    let mut n = 0usize;
    ort("KernelContext_GetInputCount", unsafe { (api().KernelContext_GetInputCount)(ctx, &mut n) })?;
    Ok(n)
}

pub fn output_count(ctx: *mut OrtKernelContext) -> Result<usize> {
    let mut n = 0usize;
    ort("KernelContext_GetOutputCount", unsafe { (api().KernelContext_GetOutputCount)(ctx, &mut n) })?;
    Ok(n)
}

/// Input `i` (null when an optional input is absent).
pub fn input(ctx: *mut OrtKernelContext, i: usize) -> Result<*const OrtValue> {
    let mut v: *const OrtValue = std::ptr::null();
    ort("KernelContext_GetInput", unsafe { (api().KernelContext_GetInput)(ctx, i, &mut v) })?;
    Ok(v)
}

/// Allocates output `j` with `dims` and returns its data pointer.
/// Output j's element type (as `TensorView`'s) and buffer, allocated by ONNX Runtime at `dims`.
pub fn output_data(ctx: *mut OrtKernelContext, j: usize, dims: &[i64]) -> Result<(i32, *mut c_void)> {
    let api = api();
    let mut v: *mut OrtValue = std::ptr::null_mut();
    ort("KernelContext_GetOutput", unsafe {
        (api.KernelContext_GetOutput)(ctx, j, dims.as_ptr(), dims.len(), &mut v)
    })?;
    if v.is_null() {
        return Err(fail(format!("ONNX Runtime returned no buffer for output {j}")));
    }
    let t = tensor_view(v)?;
    Ok((t.elem_type, t.data.cast_mut()))
}

/// An input tensor's element type (ONNX TensorProto code, as an integer so that element
/// types newer than these bindings cannot produce an invalid Rust enum), shape and data.
pub struct TensorView {
    pub elem_type: i32,
    pub shape: Vec<i64>,
    pub data: *const c_void,
}

type GetElemTypeRaw = unsafe extern "system" fn(*const OrtTensorTypeAndShapeInfo, *mut i32) -> OrtStatusPtr;

pub fn tensor_view(v: *const OrtValue) -> Result<TensorView> {
    let api = api();
    let mut ti: *mut OrtTensorTypeAndShapeInfo = std::ptr::null_mut();
    ort("GetTensorTypeAndShape", unsafe { (api.GetTensorTypeAndShape)(v, &mut ti) })?;
    // SAFETY: ONNXTensorElementDataType is repr(i32): the same ABI as an i32 out-parameter.
    let get_type: GetElemTypeRaw = unsafe { std::mem::transmute(api.GetTensorElementType) };
    let mut elem_type = 0i32;
    let mut rank = 0usize;
    let mut shape = Vec::new();
    let r = (|| {
        ort("GetTensorElementType", unsafe { get_type(ti, &mut elem_type) })?;
        ort("GetDimensionsCount", unsafe { (api.GetDimensionsCount)(ti, &mut rank) })?;
        shape = vec![0i64; rank];
        if rank > 0 {
            ort("GetDimensions", unsafe { (api.GetDimensions)(ti, shape.as_mut_ptr(), rank) })?;
        }
        Ok(())
    })();
    // SAFETY: created above, released once.
    unsafe { (api.ReleaseTensorTypeAndShapeInfo)(ti) };
    r?;
    let mut data: *mut c_void = std::ptr::null_mut();
    // The kernel only reads inputs; the C API has no const accessor at API 17.
    ort("GetTensorMutableData", unsafe { (api.GetTensorMutableData)(v as *mut OrtValue, &mut data) })?;
    Ok(TensorView { elem_type, shape, data })
}
