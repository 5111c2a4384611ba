//! The `hexagon` backend: the FusedHexPair kernel on the cDSP, reached through FastRPC by the C
//! client in custom_ops/src/fastrpc_client.c (declared here by hand, checked like hfx.rs: the
//! client's `hexfuse_rpc_client_abi` table is compared with this file's constants at
//! registration).
//!
//! One FastRPC session per process and FastRPC library (`HEXFUSE_CDSPRPC_LIB`, default
//! libcdsprpc.so): it owns the DSP's persistent worker pool. Each kernel loads its program into
//! the session at creation and unloads it when dropped. Never run on a device: on this machine
//! the session runs on the loopback stand-in for libcdsprpc.so (rpc_loopback.c).

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::{Arc, Mutex};

/// HFX_RPC_STATS (rpc_abi.h): the values run returns, in enum hfx_rpc_stat order.
pub const NUM_STATS: usize = 9;
pub const STAT_WALL_NS: usize = 0;
pub const STAT_BUSY_NS: usize = 1; // matrix, vector, copy at 1, 2, 3
pub const STAT_MATRIX_VECTOR_OVERLAP_NS: usize = 4;
pub const STAT_TASK_OVERLAP_NS: usize = 5;
pub const STAT_ITEMS_A: usize = 6;
pub const STAT_SERIALIZED: usize = 8;

pub const ENV_LIB: &str = "HEXFUSE_CDSPRPC_LIB";
const DEFAULT_LIB: &str = "libcdsprpc.so";
const MSG_BYTES: usize = 512;

/// {HFX_RPC_ABI_VERSION, HFX_RPC_STATS, sizeof(remote_arg), HFX_RPC_ALIGN} as this file expects.
const CLIENT_ABI: [u32; 4] = [1, NUM_STATS as u32, 2 * std::mem::size_of::<usize>() as u32, 128];

#[repr(C)]
struct RpcClient {
    _opaque: [u8; 0],
}

extern "C" {
    fn hfx_rpc_client_open(library: *const c_char, out: *mut *mut RpcClient, msg: *mut c_char, cap: usize) -> c_int;
    fn hfx_rpc_client_close(c: *mut RpcClient);
    fn hfx_rpc_client_load(
        c: *mut RpcClient,
        program: *const c_void,
        size: usize,
        program_id: *mut i32,
        msg: *mut c_char,
        cap: usize,
    ) -> c_int;
    fn hfx_rpc_client_unload(c: *mut RpcClient, program_id: i32, msg: *mut c_char, cap: usize) -> c_int;
    fn hfx_rpc_client_run(
        c: *mut RpcClient,
        program_id: i32,
        share_a: f32,
        inputs: *const *const c_void,
        in_bytes: *const u64,
        n_in: usize,
        outputs: *const *mut c_void,
        out_bytes: *const u64,
        n_out: usize,
        stats: *mut u64,
        msg: *mut c_char,
        cap: usize,
    ) -> c_int;

    static hexfuse_rpc_client_abi: [u32; 4];
}

/// Err when the declarations above disagree with fastrpc_client.c / rpc_abi.h as compiled.
pub fn check_abi() -> Result<(), String> {
    // SAFETY: a constant table defined in C.
    let c = unsafe { hexfuse_rpc_client_abi };
    if c == CLIENT_ABI {
        Ok(())
    } else {
        Err(format!(
            "hexfuse plugin: the FastRPC client's ABI (C {c:?}) disagrees with custom_ops/src/hexagon.rs \
             ({CLIENT_ABI:?}); update hexagon.rs"
        ))
    }
}

fn message(buf: &[c_char]) -> String {
    // SAFETY: the client NUL-terminates within the buffer; the last byte is kept 0 anyway.
    unsafe { CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned()
}

/// The FastRPC library the next session uses.
pub fn library() -> String {
    std::env::var(ENV_LIB).ok().filter(|p| !p.is_empty()).unwrap_or_else(|| DEFAULT_LIB.to_string())
}

/// An open FastRPC session on the cDSP. The C client serializes calls on it.
pub struct Session {
    ptr: *mut RpcClient,
    pub library: String,
}

// SAFETY: the client locks every call on the session; the pointer is owned until Drop.
unsafe impl Send for Session {}
unsafe impl Sync for Session {}

impl Drop for Session {
    fn drop(&mut self) {
        // SAFETY: owned pointer from hfx_rpc_client_open, closed once.
        unsafe { hfx_rpc_client_close(self.ptr) }
    }
}

static SESSION: Mutex<Option<Arc<Session>>> = Mutex::new(None);

impl Session {
    /// The process's session for the current `HEXFUSE_CDSPRPC_LIB`, opened at the first call (a
    /// failure is not cached; another library opens another session). Err: why no cDSP answered.
    pub fn shared() -> Result<Arc<Session>, String> {
        let lib = library();
        let mut guard = SESSION.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = guard.as_ref().filter(|s| s.library == lib) {
            return Ok(Arc::clone(s));
        }
        let c_lib = CString::new(lib.clone()).map_err(|_| format!("{ENV_LIB}='{lib}' contains a NUL byte"))?;
        let mut ptr: *mut RpcClient = std::ptr::null_mut();
        let mut msg = [0 as c_char; MSG_BYTES];
        // SAFETY: valid strings and out-pointers; msg has MSG_BYTES bytes.
        let st = unsafe { hfx_rpc_client_open(c_lib.as_ptr(), &mut ptr, msg.as_mut_ptr(), MSG_BYTES) };
        if st != 0 || ptr.is_null() {
            return Err(message(&msg));
        }
        let s = Arc::new(Session { ptr, library: lib });
        *guard = Some(Arc::clone(&s));
        Ok(s)
    }
}

/// A program loaded into a session; unloaded when dropped.
pub struct Loaded {
    session: Arc<Session>,
    id: i32,
}

impl Loaded {
    pub fn load(session: Arc<Session>, program: &[u8]) -> Result<Loaded, String> {
        let mut id = -1;
        let mut msg = [0 as c_char; MSG_BYTES];
        // SAFETY: program is valid for its length; the session is alive.
        let st = unsafe {
            hfx_rpc_client_load(
                session.ptr,
                program.as_ptr().cast(),
                program.len(),
                &mut id,
                msg.as_mut_ptr(),
                MSG_BYTES,
            )
        };
        if st != 0 {
            return Err(message(&msg));
        }
        Ok(Loaded { session, id })
    }

    pub fn library(&self) -> &str {
        &self.session.library
    }

    /// Loads another program (e.g. this one specialized to other shapes) into the same session.
    pub fn load_another(&self, program: &[u8]) -> Result<Loaded, String> {
        Loaded::load(Arc::clone(&self.session), program)
    }

    /// Runs the program: inputs[i] has in_bytes[i] bytes, outputs[j] out_bytes[j].
    pub fn run(
        &self,
        share_a: f32,
        inputs: &[*const c_void],
        in_bytes: &[u64],
        outputs: &[*mut c_void],
        out_bytes: &[u64],
    ) -> Result<[u64; NUM_STATS], String> {
        if inputs.len() != in_bytes.len() || outputs.len() != out_bytes.len() {
            return Err("hexagon backend: input/output counts and sizes disagree".to_string());
        }
        let mut stats = [0u64; NUM_STATS];
        let mut msg = [0 as c_char; MSG_BYTES];
        // SAFETY: every pointer is valid for its byte count (checked by the caller against the
        // program); the client copies the inputs out and the outputs back within the call.
        let st = unsafe {
            hfx_rpc_client_run(
                self.session.ptr,
                self.id,
                share_a,
                inputs.as_ptr(),
                in_bytes.as_ptr(),
                inputs.len(),
                outputs.as_ptr(),
                out_bytes.as_ptr(),
                outputs.len(),
                stats.as_mut_ptr(),
                msg.as_mut_ptr(),
                MSG_BYTES,
            )
        };
        if st != 0 {
            return Err(message(&msg));
        }
        Ok(stats)
    }
}

impl Drop for Loaded {
    fn drop(&mut self) {
        let mut msg = [0 as c_char; MSG_BYTES];
        // SAFETY: a program id of this live session. A failure leaves a slot used until the
        // session closes; there is nobody to report it to.
        let _ = unsafe { hfx_rpc_client_unload(self.session.ptr, self.id, msg.as_mut_ptr(), MSG_BYTES) };
    }
}
