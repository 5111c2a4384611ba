//! The dsp/ kernel's C API (dsp/include/hexfuse/hexfuse.h, ops.h), declared by hand, and the
//! small safe layer the plugin uses: a parsed `Program` and the process-wide `Pool`.
//!
//! The struct layouts are checked against the C compiler's at registration time
//! (`check_abi`, with the table from custom_ops/src/abi_layout.c).

use std::ffi::{c_char, c_int, c_void, CStr};
use std::mem::{offset_of, size_of};
use std::sync::Mutex;

pub const MAX_RANK: usize = 8;
pub const NUM_ENGINES: usize = 3;
pub const NUM_TASKS: usize = 2;
/// HFX_RUN_MAX_WORKERS (hexfuse.h): the workers whose runnable time a run result records.
pub const RUN_MAX_WORKERS: usize = 8;

pub const TASK_A: c_int = 0;
pub const TASK_B: c_int = 1;

pub const DTYPE_F32: u8 = 1;
pub const DTYPE_F16: u8 = 2;
pub const DTYPE_I32: u8 = 3;
pub const DTYPE_I64: u8 = 4;
pub const DTYPE_I8: u8 = 5;
pub const DTYPE_U8: u8 = 6;
pub const DTYPE_U16: u8 = 7; // format v2 programs only
pub const DTYPE_I16: u8 = 8; // format v2 programs only
pub const DTYPE_BOOL: u8 = 9; // format v2 programs only: one byte, 0 or 1

pub type Status = c_int; // enum hfx_status
pub const OK: Status = 0;
pub const ERR_BUDGET: Status = 14;
/// HFX_RUN_FORCE_SERIAL, HFX_RUN_CALLER_ONLY (hexfuse.h)
const RUN_FORCE_SERIAL: u32 = 1;
const RUN_CALLER_ONLY: u32 = 2;

#[repr(C)]
pub struct HfxProgram {
    _opaque: [u8; 0],
}

#[repr(C)]
pub struct HfxPool {
    _opaque: [u8; 0],
}

#[repr(C)]
pub struct HfxRunState {
    _opaque: [u8; 0],
}

#[repr(C)]
pub struct HfxError {
    pub status: Status,
    pub byte_offset: u32,
    pub message: [c_char; 160],
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct TensorInfo {
    pub dtype: u8,
    pub role: u8,
    pub task: u8,
    pub rank: u8,
    pub io_index: u32,
    pub dims: [u32; MAX_RANK],
    pub numel: u64,
    pub bytes: u64,
}

impl TensorInfo {
    pub fn shape(&self) -> &[u32] {
        &self.dims[..(self.rank as usize).min(MAX_RANK)]
    }
}

#[repr(C)]
pub struct PoolConfig {
    pub n_vector_workers: u32,
    pub n_matrix_workers: u32,
    pub arena_bytes: usize,
    pub flags: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct TraceEvent {
    pub worker: u16,
    pub engine: u8,
    pub task: u8,
    pub op: u32,
    pub item: u32,
    pub reserved: u32,
    pub start_ns: u64,
    pub end_ns: u64,
}

#[repr(C)]
#[derive(Default)]
pub struct TraceSummary {
    pub wall_ns: u64,
    pub busy_ns: [u64; NUM_ENGINES],
    pub task_busy_ns: [u64; NUM_TASKS],
    pub work_ns: [u64; NUM_ENGINES],
    pub matrix_vector_overlap_ns: u64,
    pub task_overlap_ns: u64,
}

#[repr(C)]
pub struct RunOptions {
    pub share_a: f32,
    pub matrix_share_a: f32,
    pub budget_bytes: usize,
    pub stop_op: [u32; NUM_TASKS],
    pub max_items: [u64; NUM_TASKS],
    pub item_fraction: [f32; NUM_TASKS],
    pub flags: u32,
    pub trace: *mut TraceEvent,
    pub trace_capacity: usize,
}

#[repr(C)]
#[derive(Default)]
pub struct RunResult {
    pub serialized: c_int,
    pub task_done: [c_int; NUM_TASKS],
    pub ops_done: [u32; NUM_TASKS],
    pub items_run: [u64; NUM_TASKS],
    pub wall_ns: u64,
    pub trace_events: usize,
    pub trace_dropped: usize,
    pub arena_used: usize,
    pub runnable_ns: [u64; RUN_MAX_WORKERS],
}

extern "C" {
    fn hfx_status_name(s: Status) -> *const c_char;
    fn hfx_program_parse(bytes: *const c_void, size: usize, out: *mut *mut HfxProgram, err: *mut HfxError) -> Status;
    fn hfx_program_free(p: *mut HfxProgram);
    fn hfx_program_num_inputs(p: *const HfxProgram, task: c_int) -> u32;
    fn hfx_program_num_outputs(p: *const HfxProgram, task: c_int) -> u32;
    fn hfx_program_num_items(p: *const HfxProgram, task: c_int) -> u64;
    fn hfx_program_num_symbols(p: *const HfxProgram) -> u32;
    fn hfx_program_scratch_bytes(p: *const HfxProgram, task: c_int) -> usize;
    fn hfx_program_specialize(
        bytes: *const c_void,
        size: usize,
        input_dims: *const *const i64,
        input_ranks: *const u32,
        n_inputs: u32,
        out: *mut c_void,
        err: *mut HfxError,
    ) -> Status;
    fn hfx_runstate_create(pool: *mut HfxPool, prog: *const HfxProgram, out: *mut *mut HfxRunState) -> Status;
    fn hfx_runstate_destroy(rs: *mut HfxRunState);
    fn hfx_program_input_info(p: *const HfxProgram, io_index: u32, out: *mut TensorInfo) -> Status;
    fn hfx_program_output_info(p: *const HfxProgram, io_index: u32, out: *mut TensorInfo) -> Status;
    fn hfx_pool_config_init(cfg: *mut PoolConfig);
    fn hfx_pool_create(cfg: *const PoolConfig, out: *mut *mut HfxPool) -> Status;
    fn hfx_pool_num_workers(pool: *const HfxPool) -> u32;
    fn hfx_trace_summarize(ev: *const TraceEvent, n: usize, out: *mut TraceSummary) -> Status;
    fn hfx_run_options_init(opt: *mut RunOptions);
    fn hfx_run(
        pool: *mut HfxPool,
        prog: *const HfxProgram,
        inputs: *const *const c_void,
        n_inputs: usize,
        outputs: *const *mut c_void,
        n_outputs: usize,
        opt: *const RunOptions,
        rs: *mut HfxRunState,
        res: *mut RunResult,
    ) -> Status;

    /// custom_ops/src/abi_layout.c: sizes and offsets as the C compiler lays them out.
    static hexfuse_abi_layout: [u32; ABI_LAYOUT_LEN];
}

pub fn status_name(s: Status) -> String {
    // SAFETY: hfx_status_name returns a static NUL-terminated string for any value.
    let p = unsafe { hfx_status_name(s) };
    if p.is_null() {
        return format!("status {s}");
    }
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// IEEE binary32 -> binary16, to nearest, ties to even, as the kernel's CAST (dsp/ref/ref_quant.h
/// ref_f32_to_f16): 65520 and up give inf, a NaN stays a quiet NaN.
pub fn f32_to_f16(x: f32) -> u16 {
    let bits = x.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let ax = bits & 0x7fff_ffff;
    if ax > 0x7f80_0000 {
        return sign | 0x7e00 | ((ax >> 13) & 0x3ff) as u16;
    }
    if ax >= 0x477f_f000 {
        return sign | 0x7c00;
    }
    if ax >= 0x3880_0000 {
        let r = ax - 0x3800_0000;
        return sign | ((r + 0xfff + ((r >> 13) & 1)) >> 13) as u16;
    }
    if ax <= 0x3300_0000 {
        return sign;
    }
    let (man, shift) = ((ax & 0x7f_ffff) | 0x80_0000, 126 - (ax >> 23));
    let (mut q, rem, half) = (man >> shift, man & ((1 << shift) - 1), 1 << (shift - 1));
    if rem > half || (rem == half && q & 1 == 1) {
        q += 1;
    }
    sign | q as u16
}

/// IEEE binary16 -> binary32, exactly (dsp/ref/ref_quant.h ref_f16_to_f32).
pub fn f16_to_f32(h: u16) -> f32 {
    let (sign, e, man) = (u32::from(h & 0x8000) << 16, u32::from((h >> 10) & 0x1f), u32::from(h & 0x3ff));
    let bits = match (e, man) {
        (0x1f, 0) => sign | 0x7f80_0000,
        (0x1f, _) => sign | 0x7fc0_0000 | (man << 13),
        (0, 0) => sign,
        (0, _) => {
            let shift = man.leading_zeros() - 21; // to put the top bit at 10
            sign | ((113 - shift) << 23) | (((man << shift) & 0x3ff) << 13)
        }
        _ => sign | ((e + 112) << 23) | (man << 13),
    };
    f32::from_bits(bits)
}

pub fn dtype_name(d: u8) -> &'static str {
    match d {
        DTYPE_F32 => "float32",
        DTYPE_F16 => "float16",
        DTYPE_I32 => "int32",
        DTYPE_I64 => "int64",
        DTYPE_I8 => "int8",
        DTYPE_U8 => "uint8",
        DTYPE_U16 => "uint16",
        DTYPE_I16 => "int16",
        DTYPE_BOOL => "bool",
        _ => "an unsupported type",
    }
}

// ---- ABI check ----------------------------------------------------------------------------

const ABI_LAYOUT_LEN: usize = 24;

/// The same table as abi_layout.c, from Rust's view of the structs.
fn rust_layout() -> [u32; ABI_LAYOUT_LEN] {
    let v = [
        size_of::<HfxError>(),
        offset_of!(HfxError, message),
        size_of::<TensorInfo>(),
        offset_of!(TensorInfo, io_index),
        offset_of!(TensorInfo, dims),
        offset_of!(TensorInfo, numel),
        offset_of!(TensorInfo, bytes),
        size_of::<PoolConfig>(),
        offset_of!(PoolConfig, arena_bytes),
        offset_of!(PoolConfig, flags),
        size_of::<TraceEvent>(),
        offset_of!(TraceEvent, op),
        offset_of!(TraceEvent, start_ns),
        size_of::<TraceSummary>(),
        offset_of!(TraceSummary, matrix_vector_overlap_ns),
        size_of::<RunOptions>(),
        offset_of!(RunOptions, budget_bytes),
        offset_of!(RunOptions, max_items),
        offset_of!(RunOptions, flags),
        offset_of!(RunOptions, trace),
        size_of::<RunResult>(),
        offset_of!(RunResult, items_run),
        offset_of!(RunResult, trace_events),
        size_of::<c_int>(), // sizeof(hfx_status)
    ];
    v.map(|x| x as u32)
}

/// Err when the declarations above disagree with hexfuse.h as compiled.
pub fn check_abi() -> Result<(), String> {
    // SAFETY: a constant table defined in C.
    let c = unsafe { hexfuse_abi_layout };
    let r = rust_layout();
    if c == r {
        Ok(())
    } else {
        Err(format!(
            "hexfuse plugin: the Rust declarations of hexfuse.h disagree with the C layout \
             (C {c:?}, Rust {r:?}); update custom_ops/src/hfx.rs"
        ))
    }
}

// ---- program ------------------------------------------------------------------------------

/// A parse or specialization error: (status name, byte offset, message).
pub type ProgramError = (String, u32, String);

fn error_message(err: &mut HfxError) -> String {
    err.message[159] = 0;
    // SAFETY: NUL-terminated within the array (set just above).
    unsafe { CStr::from_ptr(err.message.as_ptr()) }.to_string_lossy().into_owned()
}

/// The program `bytes` specialized to the node input shapes `shapes` (hfx_program_specialize):
/// the same size, its shape section evaluated at those shapes. Err names the input and axis.
pub fn specialize(bytes: &[u8], shapes: &[Vec<i64>]) -> Result<Vec<u8>, ProgramError> {
    let dims: Vec<*const i64> = shapes.iter().map(|s| s.as_ptr()).collect();
    let ranks: Vec<u32> = shapes.iter().map(|s| s.len() as u32).collect();
    let mut out = vec![0u8; bytes.len()];
    let mut err = HfxError { status: 0, byte_offset: 0, message: [0; 160] };
    // SAFETY: every pointer is valid for the length passed; out has bytes.len() bytes.
    let st = unsafe {
        hfx_program_specialize(
            bytes.as_ptr().cast(),
            bytes.len(),
            dims.as_ptr(),
            ranks.as_ptr(),
            shapes.len() as u32,
            out.as_mut_ptr().cast(),
            &mut err,
        )
    };
    if st != OK {
        return Err((status_name(st), err.byte_offset, error_message(&mut err)));
    }
    Ok(out)
}

/// A parsed and validated task program, with its node-level inputs and outputs.
pub struct Program {
    ptr: *mut HfxProgram,
    pub inputs: Vec<TensorInfo>,
    pub outputs: Vec<TensorInfo>,
    pub num_items: u64,
    /// Symbols of its shape section (0: it runs at its own input shapes only).
    pub num_symbols: u32,
}

// SAFETY: the program is immutable after parsing; hfx_run takes it const from any thread.
unsafe impl Send for Program {}
unsafe impl Sync for Program {}

impl Program {
    /// Parses `bytes` (copied by the kernel). Err: (status name, byte offset, message).
    pub fn parse(bytes: &[u8]) -> Result<Program, ProgramError> {
        let mut ptr: *mut HfxProgram = std::ptr::null_mut();
        let mut err = HfxError { status: 0, byte_offset: 0, message: [0; 160] };
        // SAFETY: bytes is valid for its length; the parser never reads out of bounds.
        let st = unsafe { hfx_program_parse(bytes.as_ptr().cast(), bytes.len(), &mut ptr, &mut err) };
        if st != OK || ptr.is_null() {
            return Err((status_name(st), err.byte_offset, error_message(&mut err)));
        }
        let mut prog = Program { ptr, inputs: Vec::new(), outputs: Vec::new(), num_items: 0, num_symbols: 0 };
        // SAFETY: ptr is a valid program until Drop.
        unsafe {
            let n_in = hfx_program_num_inputs(ptr, TASK_A) + hfx_program_num_inputs(ptr, TASK_B);
            let n_out = hfx_program_num_outputs(ptr, TASK_A) + hfx_program_num_outputs(ptr, TASK_B);
            for i in 0..n_in {
                let mut t = TensorInfo::default();
                let s = hfx_program_input_info(ptr, i, &mut t);
                if s != OK {
                    return Err((status_name(s), 0, format!("no info for program input {i}")));
                }
                prog.inputs.push(t);
            }
            for j in 0..n_out {
                let mut t = TensorInfo::default();
                let s = hfx_program_output_info(ptr, j, &mut t);
                if s != OK {
                    return Err((status_name(s), 0, format!("no info for program output {j}")));
                }
                prog.outputs.push(t);
            }
            prog.num_items = hfx_program_num_items(ptr, TASK_A) + hfx_program_num_items(ptr, TASK_B);
            prog.num_symbols = hfx_program_num_symbols(ptr);
        }
        Ok(prog)
    }

    /// Scratch bytes of the larger task: the budget the tasks need when they run one after the other.
    fn serial_scratch_bytes(&self) -> usize {
        // SAFETY: a valid program until Drop.
        unsafe { hfx_program_scratch_bytes(self.ptr, TASK_A).max(hfx_program_scratch_bytes(self.ptr, TASK_B)) }
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: owned pointer from hfx_program_parse, freed once.
        unsafe { hfx_program_free(self.ptr) }
    }
}

// ---- pool ---------------------------------------------------------------------------------

/// The process-wide persistent worker pool. Created by the first kernel, never destroyed
/// (its workers live as long as the process; the library is linked with -z nodelete).
#[derive(Clone, Copy)]
pub struct Pool(*mut HfxPool);

// SAFETY: hfx_run is safe to call from several threads on one pool (it serializes calls).
unsafe impl Send for Pool {}
unsafe impl Sync for Pool {}

static POOL: Mutex<Option<Pool>> = Mutex::new(None);

pub const ENV_WORKERS: &str = "HEXFUSE_WORKERS";
pub const ENV_PIN: &str = "HEXFUSE_PIN";
/// HFX_POOL_VECTOR_TAKES_MATRIX, HFX_POOL_PIN_WORKERS (hexfuse.h).
const POOL_VECTOR_TAKES_MATRIX: u32 = 2;
const POOL_PIN_WORKERS: u32 = 4;
const MAX_WORKERS: u32 = 256;

impl Pool {
    /// The shared pool, created at the first call with `HEXFUSE_WORKERS` vector workers
    /// (default: the kernel's, hardware threads - 1). A failed creation is not cached.
    pub fn shared() -> Result<Pool, String> {
        let mut guard = POOL.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = *guard {
            return Ok(p);
        }
        let mut cfg = PoolConfig { n_vector_workers: 0, n_matrix_workers: 0, arena_bytes: 0, flags: 0 };
        // SAFETY: fills a plain struct.
        unsafe { hfx_pool_config_init(&mut cfg) };
        // The host backend has no exclusive matrix engine: an idle vector worker (a CPU core)
        // runs matrix items too, so a matrix-only pair still uses every core.
        cfg.flags |= POOL_VECTOR_TAKES_MATRIX;
        // Each worker on its own CPU (when there are enough): unpinned, a woken worker can sit in
        // the run queue of a busy CPU while another idles, and one worker runs the whole call.
        match std::env::var(ENV_PIN).as_deref() {
            Err(_) | Ok("1") => cfg.flags |= POOL_PIN_WORKERS,
            Ok("0") => {}
            Ok(other) => return Err(format!("hexfuse: {ENV_PIN}='{other}' must be 0 or 1")),
        }
        if let Some(w) = std::env::var_os(ENV_WORKERS) {
            let w = w.to_string_lossy().into_owned();
            match w.trim().parse::<u32>() {
                Ok(n) if (1..=MAX_WORKERS).contains(&n) => cfg.n_vector_workers = n,
                _ => {
                    return Err(format!(
                        "hexfuse: {ENV_WORKERS}='{w}' is not a worker count (an integer from 1 to {MAX_WORKERS})"
                    ))
                }
            }
        }
        let mut ptr: *mut HfxPool = std::ptr::null_mut();
        // SAFETY: cfg is initialized; ptr receives the pool.
        let st = unsafe { hfx_pool_create(&cfg, &mut ptr) };
        if st != OK || ptr.is_null() {
            return Err(format!(
                "hexfuse: cannot start the worker pool ({} vector workers): {}",
                cfg.n_vector_workers,
                status_name(st)
            ));
        }
        let pool = Pool(ptr);
        *guard = Some(pool);
        Ok(pool)
    }

    pub fn num_workers(self) -> u32 {
        // SAFETY: a live pool.
        unsafe { hfx_pool_num_workers(self.0) }
    }

    /// Runs both tasks of `prog` to completion. `trace` (may be empty) receives the events. A program
    /// with a shape section whose task alone exceeds the arena runs serialized with a heap arena.
    /// `serial`: task A then task B on the calling thread alone (the pool's threads sit out).
    pub fn run(
        self,
        prog: &Program,
        inputs: &[*const c_void],
        outputs: &[*mut c_void],
        share_a: f32,
        serial: bool,
        trace: &mut [TraceEvent],
    ) -> Result<RunResult, Status> {
        let mut opt = std::mem::MaybeUninit::<RunOptions>::uninit();
        // SAFETY: hfx_run_options_init writes every field.
        let mut opt = unsafe {
            hfx_run_options_init(opt.as_mut_ptr());
            opt.assume_init()
        };
        opt.share_a = share_a;
        if serial {
            opt.flags |= RUN_FORCE_SERIAL | RUN_CALLER_ONLY;
        }
        if !trace.is_empty() {
            opt.trace = trace.as_mut_ptr();
            opt.trace_capacity = trace.len();
        }
        let mut res = RunResult::default();
        let st = self.run_with(prog, inputs, outputs, &opt, std::ptr::null_mut(), &mut res);
        if st != ERR_BUDGET || prog.num_symbols == 0 {
            return if st == OK { Ok(res) } else { Err(st) };
        }
        // A task of a program with a shape section, specialized to larger shapes than it was
        // lowered for, does not fit the pool's arena alone: on the host the tasks then run one
        // after the other with their scratch in a run state's own (heap) arena, never failing for
        // want of on-chip memory. (A v1 program was checked against the budget when it was
        // chosen: it still fails with HFX_ERR_BUDGET.)
        opt.flags |= RUN_FORCE_SERIAL;
        opt.budget_bytes = prog.serial_scratch_bytes();
        let mut rs: *mut HfxRunState = std::ptr::null_mut();
        // SAFETY: live pool and program; rs receives a run state destroyed below.
        let st = unsafe { hfx_runstate_create(self.0, prog.ptr, &mut rs) };
        if st != OK {
            return Err(st);
        }
        res = RunResult::default();
        let st = self.run_with(prog, inputs, outputs, &opt, rs, &mut res);
        // SAFETY: created above, used by no other call.
        unsafe { hfx_runstate_destroy(rs) };
        if st == OK {
            Ok(res)
        } else {
            Err(st)
        }
    }

    fn run_with(
        self,
        prog: &Program,
        inputs: &[*const c_void],
        outputs: &[*mut c_void],
        opt: &RunOptions,
        rs: *mut HfxRunState,
        res: &mut RunResult,
    ) -> Status {
        // SAFETY: the buffers match the program's inputs/outputs (checked by the caller), the
        // program and pool are alive, and hfx_run serializes concurrent calls on one pool.
        unsafe {
            hfx_run(self.0, prog.ptr, inputs.as_ptr(), inputs.len(), outputs.as_ptr(), outputs.len(), opt, rs, res)
        }
    }
}

pub fn summarize(events: &[TraceEvent]) -> TraceSummary {
    let mut s = TraceSummary::default();
    // SAFETY: events is a valid slice.
    unsafe { hfx_trace_summarize(events.as_ptr(), events.len(), &mut s) };
    s
}
