//! The FusedHexPair kernel: created once per node (parses and validates the node's task
//! program and picks its backend, backend.rs), computed by any number of ONNX Runtime threads at
//! once (checks the inputs against the program, allocates the outputs, runs both tasks on the
//! host's shared pool or on the cDSP). A program with a shape section (format v2) runs at any
//! input shapes it specializes to (specialized.rs); one without runs at its own shapes only. A call
//! runs at the share of its shape bucket when the node has a table of them (shares.rs).

use std::ffi::{c_void, CStr};
use std::fmt::Write as _;
use std::path::PathBuf;

use ort_sys::{OrtKernelContext, OrtKernelInfo};

use crate::backend::{self, Exec};
use crate::hexagon::Loaded;
use crate::hfx::{self, Pool, Program, TraceEvent};
use crate::ort::{self, fail, invalid};
use crate::schedule::{Chooser, Policy};
use crate::shares::Shares;
use crate::specialized::{self, Specialized};
use crate::trace;

/// The node this kernel computes, `hexfuse::FusedHexPair` (registered by lib.rs).
pub const DOMAIN: &CStr = c"hexfuse";
pub const OP_TYPE: &CStr = c"FusedHexPair";
pub const ENV_TRACE: &str = "HEXFUSE_TRACE";

/// Trace buffers are sized to the program's work items; this caps one run's buffer.
const MAX_TRACE_EVENTS: u64 = 1 << 22;

pub struct Kernel {
    name: String,
    bytes: Vec<u8>,
    program: Program,
    exec: Exec,
    specialized: specialized::Cache,
    shares: Shares,
    /// The share at the program's own input shapes.
    own_share: f32,
    trace_path: Option<PathBuf>,
    policy: Policy,
    /// Fused or serial, for calls at the program's own input shapes (a specialized program has its own).
    schedule: Chooser,
}

/// A float32 tensor where the program reads float16: ONNX Runtime drops the Cast to float16 it inserts
/// after an op it has no float16 kernel for (hama's GRU) when the consumer takes any type, as this op
/// does, so the value arrives unrounded. The kernel rounds it, as the model says (hfx::f32_to_f16).
fn widened_half(t: &ort::TensorView, want: u8) -> bool {
    want == hfx::DTYPE_F16 && t.elem_type == ONNX_FLOAT
}

const ONNX_FLOAT: i32 = 1; // TensorProto.FLOAT

/// ONNX TensorProto element type -> hfx dtype (0: not a type the kernel knows).
fn hfx_dtype(onnx_type: i32) -> u8 {
    match onnx_type {
        1 => hfx::DTYPE_F32,
        10 => hfx::DTYPE_F16,
        6 => hfx::DTYPE_I32,
        7 => hfx::DTYPE_I64,
        3 => hfx::DTYPE_I8,
        2 => hfx::DTYPE_U8,
        4 => hfx::DTYPE_U16,
        5 => hfx::DTYPE_I16,
        9 => hfx::DTYPE_BOOL,
        _ => 0,
    }
}

fn onnx_type_name(onnx_type: i32) -> String {
    match hfx_dtype(onnx_type) {
        0 => format!("ONNX element type {onnx_type}"),
        d => hfx::dtype_name(d).to_string(),
    }
}

fn dims_str<T: std::fmt::Display>(dims: &[T]) -> String {
    let mut s = String::from("[");
    for (i, d) in dims.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        let _ = write!(s, "{d}");
    }
    s.push(']');
    s
}

impl Kernel {
    fn where_(name: &str) -> String {
        format!("{}::{} node '{name}'", DOMAIN.to_string_lossy(), OP_TYPE.to_string_lossy())
    }

    pub fn create(info: *const OrtKernelInfo) -> ort::Result<Kernel> {
        let name = ort::node_name(info);
        let at = Self::where_(&name);

        let shares = Shares::new(
            ort::attr_f32(info, c"share_a").unwrap_or(0.5),
            ort::attr_i64s(info, c"share_buckets"),
            ort::attr_f32s(info, c"share_table"),
        )
        .map_err(|m| invalid(format!("{at}: {m}")))?;

        let bytes = ort::attr_bytes(info, c"program").map_err(|m| {
            invalid(format!(
                "{at} has no 'program' attribute ({m}): lower the model with hexfuse_onnx.lowering.attach_programs, \
                 or run it without the hexfuse plugin so that ONNX Runtime runs the fallback body"
            ))
        })?;
        let program = Program::parse(&bytes).map_err(|(status, offset, msg)| {
            invalid(format!(
                "{at}: the 'program' attribute is not a valid task program ({status} at byte {offset}: {msg}); \
                 re-lower the model with hexfuse_onnx.lowering.attach_programs"
            ))
        })?;

        // The node says which format it was lowered for; the (valid) bytes say it again at offset 4.
        // A mismatch means the attributes were edited apart: refuse rather than guess.
        let in_bytes = bytes.get(4..6).map(|v| i64::from(u16::from_le_bytes([v[0], v[1]])));
        if let (Some(attr), Some(inside)) = (ort::attr_i64(info, c"program_version"), in_bytes) {
            if attr != inside {
                return Err(invalid(format!(
                    "{at}: program_version = {attr} but the 'program' bytes are version {inside}; \
                     re-lower the model with hexfuse_onnx.lowering.attach_programs"
                )));
            }
        }
        let (n_in, n_out) = (ort::info_input_count(info)?, ort::info_output_count(info)?);
        if n_in != program.inputs.len() || n_out != program.outputs.len() {
            return Err(invalid(format!(
                "{at} has {n_in} inputs and {n_out} outputs, its task program {} and {}",
                program.inputs.len(),
                program.outputs.len()
            )));
        }
        for (j, t) in program.outputs.iter().enumerate() {
            // int32: MatMulInteger's accumulators (a pair that ends at one); int64: a Shape's dims gathered;
            // float16: a float16 network's outputs, rounded once by CAST at the pair's end; bool: a comparison's
            let produced = [
                hfx::DTYPE_F32,
                hfx::DTYPE_F16,
                hfx::DTYPE_U8,
                hfx::DTYPE_I8,
                hfx::DTYPE_U16,
                hfx::DTYPE_I16,
                hfx::DTYPE_I32,
                hfx::DTYPE_I64,
                hfx::DTYPE_BOOL,
            ];
            if !produced.contains(&t.dtype) {
                return Err(invalid(format!(
                    "{at}: program output {j} is {}, the kernel produces float32, float16, 8- to 64-bit integer and bool outputs only",
                    hfx::dtype_name(t.dtype)
                )));
            }
        }

        let exec = backend::select(&bytes).map_err(fail)?;
        // "{node}" in the path is replaced by the node's name (with '/' made '_'), so that a
        // model with several pairs keeps one trace file per pair.
        let trace_path = std::env::var(ENV_TRACE)
            .ok()
            .filter(|p| !p.is_empty())
            .map(|p| PathBuf::from(p.replace("{node}", &name.replace('/', "_"))));
        let own_shapes: Vec<Vec<i64>> =
            program.inputs.iter().map(|t| t.shape().iter().map(|&d| i64::from(d)).collect()).collect();
        let own_share = shares.pick(&own_shapes);
        let policy = Policy::from_env().map_err(|m| invalid(format!("{at}: {m}")))?;
        Ok(Kernel {
            name,
            bytes,
            program,
            exec,
            specialized: specialized::Cache::default(),
            shares,
            own_share,
            trace_path,
            policy,
            schedule: Chooser::new(policy),
        })
    }

    pub fn compute(&self, ctx: *mut OrtKernelContext) -> ort::Result<()> {
        let at = Self::where_(&self.name);
        let (n_in, n_out) = (ort::input_count(ctx)?, ort::output_count(ctx)?);
        let (want_in, want_out) = (&self.program.inputs, &self.program.outputs);
        if n_in != want_in.len() || n_out != want_out.len() {
            return Err(invalid(format!(
                "{at}: got {n_in} inputs and {n_out} outputs, the task program has {} and {}",
                want_in.len(),
                want_out.len()
            )));
        }

        let mut views = Vec::with_capacity(n_in);
        for (i, want) in want_in.iter().enumerate() {
            let v = ort::input(ctx, i)?;
            if v.is_null() {
                return Err(invalid(format!("{at}: input {i} is missing")));
            }
            let t = ort::tensor_view(v)?;
            if hfx_dtype(t.elem_type) != want.dtype && !widened_half(&t, want.dtype) {
                return Err(invalid(format!(
                    "{at}: input {i} has dtype {}, the task program expects {}",
                    onnx_type_name(t.elem_type),
                    hfx::dtype_name(want.dtype)
                )));
            }
            views.push(t);
        }
        let shapes: Vec<Vec<i64>> = views.iter().map(|t| t.shape.clone()).collect();
        let spec = self.program_for(&shapes)?;
        let program = spec.as_ref().map_or(&self.program, |s| &s.program);
        let share_a = spec.as_ref().map_or(self.own_share, |s| s.share_a);
        let schedule = spec.as_ref().map_or(&self.schedule, |s| &s.schedule);

        let mut inputs: Vec<*const c_void> = Vec::with_capacity(n_in);
        let mut narrowed: Vec<Vec<u16>> = Vec::new(); // float16 copies of float32 inputs, alive for the run
        for (i, (t, want)) in views.iter().zip(&program.inputs).enumerate() {
            if t.data.is_null() && want.bytes > 0 {
                return Err(fail(format!("{at}: input {i} has no data")));
            }
            if widened_half(t, want.dtype) && want.bytes > 0 {
                // SAFETY: ONNX Runtime's float32 tensor of want.bytes / 2 elements (the shapes matched).
                let wide = unsafe { std::slice::from_raw_parts(t.data.cast::<f32>(), (want.bytes / 2) as usize) };
                let half: Vec<u16> = wide.iter().map(|&x| hfx::f32_to_f16(x)).collect();
                inputs.push(half.as_ptr().cast()); // the Vec's heap buffer stays put when moved
                narrowed.push(half);
                continue;
            }
            inputs.push(t.data);
        }
        let mut outputs: Vec<*mut c_void> = Vec::with_capacity(n_out);
        let mut halves: Vec<(Vec<u16>, *mut f32)> = Vec::new(); // float16 results ORT takes as float32
        for (j, t) in program.outputs.iter().enumerate() {
            let dims: Vec<i64> = t.shape().iter().map(|&d| i64::from(d)).collect();
            let (elem_type, data) = ort::output_data(ctx, j, &dims)?;
            if t.dtype == hfx::DTYPE_F16 && elem_type == ONNX_FLOAT {
                // ORT drops its inserted Cast when a float16 output feeds an op it runs in float32 (a GRU)
                let mut half = vec![0u16; (t.bytes / 2) as usize];
                outputs.push(half.as_mut_ptr().cast()); // the Vec's heap buffer stays put when moved
                halves.push((half, data.cast()));
                continue;
            }
            if hfx_dtype(elem_type) != t.dtype {
                return Err(invalid(format!(
                    "{at}: output {j} has dtype {}, the task program writes {}",
                    onnx_type_name(elem_type),
                    hfx::dtype_name(t.dtype)
                )));
            }
            outputs.push(data);
        }

        match &self.exec {
            Exec::Host(pool) => self.run_host(*pool, program, share_a, schedule, &inputs, &outputs),
            Exec::Hexagon(loaded) => {
                let loaded = spec.as_ref().and_then(|s| s.loaded.as_ref()).unwrap_or(loaded);
                self.run_hexagon(loaded, program, share_a, &inputs, &outputs)
            }
        }?;
        for (half, wide) in &halves {
            // SAFETY: ORT's float32 buffer of as many elements as the program's float16 output.
            let wide = unsafe { std::slice::from_raw_parts_mut(*wide, half.len()) };
            wide.iter_mut().zip(half).for_each(|(w, &h)| *w = hfx::f16_to_f32(h));
        }
        Ok(())
    }

    /// None: the node's own program fits these input shapes as it is; else the program
    /// specialized to them (cached).
    fn program_for(&self, shapes: &[Vec<i64>]) -> ort::Result<Option<std::sync::Arc<Specialized>>> {
        let at = Self::where_(&self.name);
        let own = |i: usize| shapes[i].iter().copied().eq(self.program.inputs[i].shape().iter().map(|&d| i64::from(d)));
        let Some(i) = (0..shapes.len()).find(|&i| !own(i)) else {
            return Ok(None);
        };
        if self.program.num_symbols == 0 {
            return Err(invalid(format!(
                "{at}: input {i} has shape {}, the task program was lowered for {} and has no shape section \
                 (re-lower the model for these shapes)",
                dims_str(&shapes[i]),
                dims_str(self.program.inputs[i].shape())
            )));
        }
        self.specialized.get_or_make(shapes, || self.specialize(shapes)).map(Some)
    }

    fn specialize(&self, shapes: &[Vec<i64>]) -> ort::Result<Specialized> {
        let at = Self::where_(&self.name);
        let shown = shapes.iter().map(|s| dims_str(s)).collect::<Vec<_>>().join(", ");
        let refused = |(status, offset, msg): hfx::ProgramError| {
            invalid(format!(
                "{at}: the task program cannot run at these input shapes ({status} at byte {offset}: {msg}): {shown}"
            ))
        };
        let bytes = hfx::specialize(&self.bytes, shapes).map_err(refused)?;
        let program = Program::parse(&bytes).map_err(refused)?;
        let loaded = match &self.exec {
            Exec::Host(_) => None,
            Exec::Hexagon(template) => Some(template.load_another(&bytes).map_err(|m| {
                fail(format!(
                    "{at}: the hexagon backend cannot load the task program specialized to {shown} ({}): {m}",
                    template.library()
                ))
            })?),
        };
        Ok(Specialized { program, loaded, share_a: self.shares.pick(shapes), schedule: Chooser::new(self.policy) })
    }

    fn run_host(
        &self,
        pool: Pool,
        program: &Program,
        share_a: f32,
        schedule: &Chooser,
        inputs: &[*const c_void],
        outputs: &[*mut c_void],
    ) -> ort::Result<()> {
        let at = Self::where_(&self.name);
        let serial = schedule.serial();
        let mut events = match &self.trace_path {
            Some(_) => vec![TraceEvent::default(); (program.num_items + 64).min(MAX_TRACE_EVENTS) as usize],
            None => Vec::new(),
        };
        let res = pool
            .run(program, inputs, outputs, share_a, serial, &mut events)
            .map_err(|st| fail(format!("{at}: the kernel failed: {}", hfx::status_name(st))))?;
        schedule.record(serial, res.wall_ns);

        if let Some(path) = &self.trace_path {
            events.truncate(res.trace_events.min(events.len()));
            let run = trace::Run { node: &self.name, share_a, workers: pool.num_workers(), result: &res };
            trace::write(path, &trace::render(&run, &events))
                .map_err(|e| fail(format!("{at}: cannot write the trace to {}: {e}", path.display())))?;
        }
        Ok(())
    }

    fn run_hexagon(
        &self,
        loaded: &Loaded,
        program: &Program,
        share_a: f32,
        inputs: &[*const c_void],
        outputs: &[*mut c_void],
    ) -> ort::Result<()> {
        let at = Self::where_(&self.name);
        let in_bytes: Vec<u64> = program.inputs.iter().map(|t| t.bytes).collect();
        let out_bytes: Vec<u64> = program.outputs.iter().map(|t| t.bytes).collect();
        let stats = loaded
            .run(share_a, inputs, &in_bytes, outputs, &out_bytes)
            .map_err(|m| fail(format!("{at}: the hexagon backend failed ({}): {m}", loaded.library())))?;
        if let Some(path) = &self.trace_path {
            trace::write(path, &trace::render_hexagon(&self.name, share_a, &stats))
                .map_err(|e| fail(format!("{at}: cannot write the trace to {}: {e}", path.display())))?;
        }
        Ok(())
    }
}
