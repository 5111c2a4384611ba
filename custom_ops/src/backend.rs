//! Which backend runs a kernel: `HEXFUSE_BACKEND` = auto | host | hexagon (default auto), read
//! at kernel creation, i.e. when a session is created, like HEXFUSE_WORKERS and HEXFUSE_TRACE.
//!
//! - `host`: the dsp/ kernel linked into the plugin, on the process-wide pool (hfx.rs).
//! - `hexagon`: the kernel on the cDSP through FastRPC (hexagon.rs). If no cDSP answers, kernel
//!   creation (and so session creation) fails with the reason.
//! - `auto`: hexagon when a FastRPC session opens, else host. The choice and its reason are
//!   written to stderr once per process.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::hexagon::{self, Loaded, Session};
use crate::hfx::Pool;

pub const ENV_BACKEND: &str = "HEXFUSE_BACKEND";

/// What runs a kernel's program.
pub enum Exec {
    Host(Pool),
    Hexagon(Loaded),
}

enum Requested {
    Auto,
    Host,
    Hexagon,
}

fn requested() -> Result<Requested, String> {
    let v = std::env::var(ENV_BACKEND).unwrap_or_default();
    match v.trim() {
        "" | "auto" => Ok(Requested::Auto),
        "host" => Ok(Requested::Host),
        "hexagon" => Ok(Requested::Hexagon),
        other => Err(format!("hexfuse: {ENV_BACKEND}='{other}' is not a backend (auto, host or hexagon)")),
    }
}

static AUTO_LOGGED: AtomicBool = AtomicBool::new(false);

fn log_auto_once(choice: &str, why: &str) {
    if !AUTO_LOGGED.swap(true, Ordering::AcqRel) {
        eprintln!("hexfuse: backend auto -> {choice}: {why}");
    }
}

fn load(session: std::sync::Arc<Session>, program: &[u8]) -> Result<Exec, String> {
    let lib = session.library.clone();
    Loaded::load(session, program)
        .map(Exec::Hexagon)
        .map_err(|m| format!("hexfuse: the hexagon backend cannot load the task program through {lib}: {m}"))
}

/// The backend for a kernel whose task program is `program` (already parsed and checked).
pub fn select(program: &[u8]) -> Result<Exec, String> {
    match requested()? {
        Requested::Host => Pool::shared().map(Exec::Host),
        Requested::Hexagon => {
            let session = Session::shared().map_err(|why| {
                format!(
                    "hexfuse: {ENV_BACKEND}=hexagon but the hexagon backend is unavailable: {why} \
                     (use HEXFUSE_BACKEND=host or auto to run on the CPU; {} names another FastRPC library)",
                    hexagon::ENV_LIB
                )
            })?;
            load(session, program)
        }
        Requested::Auto => match Session::shared() {
            Ok(session) => {
                log_auto_once("hexagon", &format!("a cDSP answered through {}", session.library));
                load(session, program)
            }
            Err(why) => {
                log_auto_once("host", &why);
                Pool::shared().map(Exec::Host)
            }
        },
    }
}
