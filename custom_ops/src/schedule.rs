//! How a host call runs its two tasks: `fused` (both at once on the pool's workers, the caller one of
//! them) or `serial` (task A then task B on the calling thread alone, the pool's threads asleep).
//! `HEXFUSE_SCHEDULE` = adaptive | fused | serial (default adaptive), read at kernel creation.
//!
//! Fused pays only when another worker gets a CPU while the caller works. On a loaded machine it
//! often does not: the caller then runs every item itself, pays the wake-ups, and waits whenever a
//! worker holding an item was preempted, so the call is slower than the serial one. `adaptive`
//! times both per node and program (the wall time of each call, hfx_run's own) and runs the one
//! whose median over its last WINDOW calls is lower; every EXPLORE_EVERY-th call runs the other to
//! keep its figure current, so a machine that gets quieter (or busier) is followed.

use std::sync::Mutex;

pub const ENV_SCHEDULE: &str = "HEXFUSE_SCHEDULE";

/// Calls kept per schedule; the median of these decides.
const WINDOW: usize = 8;
/// Calls each schedule runs before the medians decide.
const FIRST_CALLS: usize = 3;
/// One call in this many runs the schedule not preferred now.
const EXPLORE_EVERY: u64 = 16;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Policy {
    Adaptive,
    Fused,
    Serial,
}

impl Policy {
    pub fn from_env() -> Result<Policy, String> {
        match std::env::var(ENV_SCHEDULE).as_deref().map(str::trim) {
            Err(_) | Ok("" | "adaptive") => Ok(Policy::Adaptive),
            Ok("fused") => Ok(Policy::Fused),
            Ok("serial") => Ok(Policy::Serial),
            Ok(other) => Err(format!("{ENV_SCHEDULE}='{other}' is not a schedule (adaptive, fused or serial)")),
        }
    }
}

/// The last WINDOW wall times of one schedule (nanoseconds), oldest overwritten first.
#[derive(Default, Clone, Copy)]
struct Window {
    ns: [u64; WINDOW],
    len: usize,
    next: usize,
}

impl Window {
    fn push(&mut self, ns: u64) {
        self.ns[self.next] = ns;
        self.next = (self.next + 1) % WINDOW;
        self.len = (self.len + 1).min(WINDOW);
    }

    fn median(&self) -> u64 {
        let mut v = self.ns; // a copy on the stack: this runs on every call
        let v = &mut v[..self.len];
        v.sort_unstable();
        v[v.len() / 2]
    }
}

#[derive(Default)]
struct State {
    calls: u64,
    fused: Window,
    serial: Window,
}

/// One node's (one program's) choice between the schedules.
pub struct Chooser {
    policy: Policy,
    state: Mutex<State>,
}

impl Chooser {
    pub fn new(policy: Policy) -> Chooser {
        Chooser { policy, state: Mutex::new(State::default()) }
    }

    /// True: run this call serial.
    pub fn serial(&self) -> bool {
        match self.policy {
            Policy::Fused => false,
            Policy::Serial => true,
            Policy::Adaptive => {
                let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
                s.calls += 1;
                if s.fused.len < FIRST_CALLS || s.serial.len < FIRST_CALLS {
                    return s.serial.len < s.fused.len;
                }
                let prefer_serial = s.serial.median() < s.fused.median();
                prefer_serial != s.calls.is_multiple_of(EXPLORE_EVERY)
            }
        }
    }

    /// The wall time of a call run with `serial`.
    pub fn record(&self, serial: bool, wall_ns: u64) {
        if self.policy != Policy::Adaptive {
            return;
        }
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if serial {
            s.serial.push(wall_ns);
        } else {
            s.fused.push(wall_ns);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(chooser: &Chooser, calls: usize, fused_ns: u64, serial_ns: u64) -> usize {
        (0..calls)
            .filter(|_| {
                let serial = chooser.serial();
                chooser.record(serial, if serial { serial_ns } else { fused_ns });
                serial
            })
            .count()
    }

    #[test]
    fn adaptive_follows_the_faster_schedule_and_keeps_exploring() {
        let c = Chooser::new(Policy::Adaptive);
        let serial = run(&c, 160, 1000, 800);
        assert!((140..=155).contains(&serial), "{serial} of 160 calls serial");
        run(&c, 160, 600, 800); // the machine got quieter: fused wins now (exploring finds it)
        let serial = run(&c, 160, 600, 800);
        assert!((5..=15).contains(&serial), "{serial} of 160 calls serial");
    }

    #[test]
    fn fixed_policies_never_switch() {
        assert_eq!(run(&Chooser::new(Policy::Fused), 50, 1000, 10), 0);
        assert_eq!(run(&Chooser::new(Policy::Serial), 50, 10, 1000), 50);
    }
}
