//! The work share a call runs at: the node's `share_a`, or, when the node carries a table of shares
//! per shape bucket (`share_buckets`: the node's input elements per bucket, ascending;
//! `share_table`: one share each; written by the pass, hexfuse_onnx/buckets.py), the share of the
//! bucket whose key is nearest to the call's input elements on a log scale (a tie: the smaller).

/// A longer table is refused (the pass writes a handful of buckets).
pub const MAX_BUCKETS: usize = 16;

#[derive(Debug, Clone, PartialEq)]
pub struct Shares {
    default: f32,
    buckets: Vec<(u64, f32)>,
}

fn is_share(s: f32) -> bool {
    (0.0..=1.0).contains(&s)
}

impl Shares {
    /// From the node's attributes; Err(what is wrong with them).
    pub fn new(default: f32, keys: Option<Vec<i64>>, shares: Option<Vec<f32>>) -> Result<Shares, String> {
        if !is_share(default) {
            return Err(format!("share_a = {default} is not a share in [0, 1]"));
        }
        let (keys, shares) = match (keys, shares) {
            (None, None) => return Ok(Shares { default, buckets: Vec::new() }),
            (Some(k), Some(s)) => (k, s),
            _ => return Err("share_buckets and share_table must be given together".into()),
        };
        if keys.len() != shares.len() || keys.is_empty() || keys.len() > MAX_BUCKETS {
            return Err(format!(
                "share_buckets has {} keys and share_table {} shares; they need the same count, 1 to {MAX_BUCKETS}",
                keys.len(),
                shares.len()
            ));
        }
        if keys.first().is_some_and(|&k| k < 1) || keys.windows(2).any(|w| w[0] >= w[1]) {
            return Err("share_buckets must be positive and strictly ascending".into());
        }
        if let Some(s) = shares.iter().find(|&&s| !is_share(s)) {
            return Err(format!("share_table holds {s}, not a share in [0, 1]"));
        }
        Ok(Shares { default, buckets: keys.into_iter().map(|k| k as u64).zip(shares).collect() })
    }

    /// The share for a call with these input shapes.
    pub fn pick(&self, shapes: &[Vec<i64>]) -> f32 {
        if self.buckets.is_empty() {
            return self.default;
        }
        let elements: u64 = shapes.iter().map(|s| s.iter().map(|&d| d.max(0) as u64).product::<u64>()).sum();
        let at = (elements.max(1) as f64).ln();
        let distance = |&(key, _): &(u64, f32)| ((key as f64).ln() - at).abs();
        let mut best = &self.buckets[0];
        for b in &self.buckets[1..] {
            if distance(b) < distance(best) {
                best = b;
            }
        }
        best.1
    }
}
