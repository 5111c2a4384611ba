//! The trace file (`HEXFUSE_TRACE`): after every run, the last run's summary (per-engine busy
//! time, the matrix/vector overlap, the two tasks' overlap) and its work-item events, as JSON.
//! The hexagon backend returns the summary only (the DSP keeps its events): its file has
//! `"backend": "hexagon"` and no events.
//! Written to a temporary file and renamed, so a reader never sees a half-written file, and
//! under one lock, so that concurrent runs do not interleave.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;
use std::sync::Mutex;

use crate::hexagon;
use crate::hfx::{self, RunResult, TraceEvent};

static WRITE_LOCK: Mutex<()> = Mutex::new(());

pub struct Run<'a> {
    pub node: &'a str,
    pub share_a: f32,
    pub workers: u32,
    pub result: &'a RunResult,
}

/// enum hfx_engine order (ops.h): HFX_ENGINE_MATRIX, HFX_ENGINE_VECTOR, HFX_ENGINE_COPY.
const ENGINES: [&str; hfx::NUM_ENGINES] = ["matrix", "vector", "copy"];

fn json_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn per_engine(out: &mut String, v: &[u64; hfx::NUM_ENGINES]) {
    out.push('{');
    for (i, name) in ENGINES.iter().enumerate() {
        let _ = write!(out, "{}\"{name}\": {}", if i > 0 { ", " } else { "" }, v[i]);
    }
    out.push('}');
}

/// The JSON document for one run of the hexagon backend, from the statistics the DSP returns.
pub fn render_hexagon(node: &str, share_a: f32, stats: &[u64; hexagon::NUM_STATS]) -> String {
    let mut out = String::with_capacity(512);
    out.push_str("{\"node\": ");
    json_str(&mut out, node);
    let busy = [stats[hexagon::STAT_BUSY_NS], stats[hexagon::STAT_BUSY_NS + 1], stats[hexagon::STAT_BUSY_NS + 2]];
    let _ = write!(
        out,
        ", \"backend\": \"hexagon\", \"share_a\": {share_a}, \"serialized\": {}, \"wall_ns\": {w}, \"run_wall_ns\": {w}, \"busy_ns\": ",
        stats[hexagon::STAT_SERIALIZED],
        w = stats[hexagon::STAT_WALL_NS]
    );
    per_engine(&mut out, &busy);
    let _ = writeln!(
        out,
        ", \"matrix_vector_overlap_ns\": {}, \"task_overlap_ns\": {}, \"items_run\": [{}, {}], \"events\": 0, \"trace_events\": []}}",
        stats[hexagon::STAT_MATRIX_VECTOR_OVERLAP_NS],
        stats[hexagon::STAT_TASK_OVERLAP_NS],
        stats[hexagon::STAT_ITEMS_A],
        stats[hexagon::STAT_ITEMS_A + 1]
    );
    out
}

/// Per worker of the run (the caller first): the time its thread waited for a CPU during the call.
fn runnable<'a>(run: &Run<'a>) -> &'a [u64] {
    let n = (run.workers as usize).min(hfx::RUN_MAX_WORKERS);
    &run.result.runnable_ns[..n]
}

/// The JSON document for one run.
pub fn render(run: &Run, events: &[TraceEvent]) -> String {
    let s = hfx::summarize(events);
    let r = run.result;
    let t0 = events.iter().map(|e| e.start_ns).min().unwrap_or(0);
    let mut out = String::with_capacity(512 + events.len() * 96);
    out.push_str("{\"node\": ");
    json_str(&mut out, run.node);
    let _ = write!(
        out,
        ", \"share_a\": {}, \"workers\": {}, \"serialized\": {}, \"wall_ns\": {}, \"run_wall_ns\": {}, \"busy_ns\": ",
        run.share_a, run.workers, r.serialized, s.wall_ns, r.wall_ns
    );
    per_engine(&mut out, &s.busy_ns);
    out.push_str(", \"work_ns\": ");
    per_engine(&mut out, &s.work_ns);
    let _ = write!(
        out,
        ", \"task_busy_ns\": [{}, {}], \"matrix_vector_overlap_ns\": {}, \"task_overlap_ns\": {}, \
         \"items_run\": [{}, {}], \"events\": {}, \"dropped\": {}, \"t0_ns\": {t0}",
        s.task_busy_ns[0],
        s.task_busy_ns[1],
        s.matrix_vector_overlap_ns,
        s.task_overlap_ns,
        r.items_run[0],
        r.items_run[1],
        events.len(),
        r.trace_dropped
    );
    let _ = write!(out, ", \"runnable_ns\": {:?}", runnable(run));
    out.push_str(", \"trace_events\": [");
    for (i, e) in events.iter().enumerate() {
        let engine = ENGINES.get(e.engine as usize).copied().unwrap_or("unknown");
        let _ = write!(
            out,
            "{}\n  {{\"worker\": {}, \"engine\": \"{engine}\", \"task\": \"{}\", \"op\": {}, \"item\": {}, \
             \"start_ns\": {}, \"end_ns\": {}}}",
            if i > 0 { "," } else { "" },
            e.worker,
            if e.task == 0 { "A" } else { "B" },
            e.op,
            e.item,
            e.start_ns.saturating_sub(t0),
            e.end_ns.saturating_sub(t0)
        );
    }
    out.push_str("]}\n");
    out
}

pub fn write(path: &Path, doc: &str) -> std::io::Result<()> {
    let _guard = WRITE_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp{}", std::process::id()));
    let tmp = std::path::PathBuf::from(tmp);
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(doc.as_bytes())?;
    }
    std::fs::rename(&tmp, path)
}
