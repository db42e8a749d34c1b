//! Profiles: what the mappers know about an application's threads
//! (`streammap-cache-topology-mapping.txt` §IV.B). They are measured by the dataflow engine
//! (`nearflow map` builds them from a profiling run), saved as JSON and read back, so a mapping
//! can be computed offline as the paper's workflow does (Fig. 7).

use serde::{Deserialize, Serialize};

use crate::MapError;

/// What the contention weights measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ContentionUnit {
    /// Last-level cache misses per thousand instructions, from hardware counters (§IV.B.4).
    LlcMissesPerKiloInstruction,
    /// The thread's working set in bytes: the state its operators report plus the packets in
    /// its input buffers. The fallback where there are no counters.
    WorkingSetBytes,
    /// Bytes the thread read from memory (every cache missed, the last level's included) in a
    /// simulated run (SIMULATED).
    SimulatedLlcMisses,
}

/// A profile of `n` threads.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    /// The application it was measured on (e.g. `vwap --window 5 --threads 4`).
    pub app: String,
    /// The threads' names; thread `i` is row and column `i` of the matrices.
    pub threads: Vec<String>,
    /// Bytes sent from thread `i` to thread `j` over the plan's streams (TreeMatch).
    pub communication: Vec<Vec<u64>>,
    /// Bytes shared by threads `i` and `j` (TreeMatch-S): the communication, plus the state of
    /// every operator run by both, counted each time it passes from one to the other.
    pub correlation: Vec<Vec<u64>>,
    /// Each thread's demand on shared memory resources (Holistic's vertex weights).
    pub contention: Vec<f64>,
    pub contention_unit: ContentionUnit,
    /// How the figures were obtained (fallbacks taken, counters missing, the run measured).
    #[serde(default)]
    pub notes: Vec<String>,
}

impl Profile {
    /// Checks the shapes and values; every mapper calls it.
    pub fn validate(&self) -> Result<(), MapError> {
        let n = self.threads.len();
        let bad = |why: String| Err(MapError::BadProfile(why));
        if n == 0 {
            return bad("the profile has no thread".into());
        }
        for (name, m) in [
            ("communication", &self.communication),
            ("correlation", &self.correlation),
        ] {
            if m.len() != n || m.iter().any(|r| r.len() != n) {
                return bad(format!("the {name} matrix is not {n}x{n}"));
            }
        }
        if self.contention.len() != n {
            return bad(format!(
                "{} contention weights for {n} threads",
                self.contention.len()
            ));
        }
        if let Some(w) = self.contention.iter().find(|w| !w.is_finite() || **w < 0.0) {
            return bad(format!("contention weight {w} is not a finite value >= 0"));
        }
        Ok(())
    }

    /// Reads a profile from JSON text.
    pub fn from_json(text: &str) -> Result<Profile, MapError> {
        let p: Profile =
            serde_json::from_str(text).map_err(|e| MapError::BadProfile(e.to_string()))?;
        p.validate()?;
        Ok(p)
    }

    /// A profile with only a communication matrix (the correlation is the same, no
    /// contention), for tests and hand-made cases.
    pub fn from_communication(app: &str, comm: Vec<Vec<u64>>) -> Profile {
        let n = comm.len();
        Profile {
            app: app.into(),
            threads: (0..n).map(|i| format!("t{i}")).collect(),
            correlation: comm.clone(),
            communication: comm,
            contention: vec![0.0; n],
            contention_unit: ContentionUnit::WorkingSetBytes,
            notes: Vec::new(),
        }
    }
}

/// `m[i][j] + m[j][i]` as f64: how much `i` and `j` gain from being close.
pub(crate) fn symmetric(m: &[Vec<u64>]) -> Vec<Vec<f64>> {
    let n = m.len();
    (0..n)
        .map(|i| {
            (0..n)
                .map(|j| {
                    if i == j {
                        0.0
                    } else {
                        (m[i][j] + m[j][i]) as f64
                    }
                })
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_profile_round_trips_through_json_and_bad_ones_are_refused() {
        let p = Profile::from_communication("pc", vec![vec![0, 5], vec![0, 0]]);
        let text = serde_json::to_string(&p).unwrap();
        assert_eq!(Profile::from_json(&text).unwrap(), p);
        let mut q = p.clone();
        q.correlation.pop();
        assert!(matches!(q.validate(), Err(MapError::BadProfile(m)) if m.contains("correlation")));
        let mut q = p.clone();
        q.contention[1] = f64::NAN;
        assert!(q.validate().is_err());
        assert!(Profile::from_json("{").is_err());
    }
}
