//! A run's budget (`defaults.budget_usd`): what the whole tree may spend, what it has
//! spent, and every check made against it, with its message, in one place: whether a
//! spawn fits, whether another turn may start, whether a remote child must stop.

use std::sync::atomic::{AtomicU64, Ordering};

/// What a run may spend and has spent, shared by every agent of its tree.
#[derive(Debug, Default)]
pub(crate) struct Budget {
    /// The cap, in US dollars (`None`: no cap).
    limit: Option<f64>,
    /// Dollars spent so far, in millionths.
    spent_micros: AtomicU64,
}

impl Budget {
    /// A budget of `limit` dollars, nothing spent.
    pub(crate) fn new(limit: Option<f64>) -> Budget {
        Budget {
            limit,
            spent_micros: AtomicU64::new(0),
        }
    }

    /// Adds `usd` to what was spent.
    pub(crate) fn charge(&self, usd: f64) {
        self.spent_micros
            .fetch_add((usd * 1e6).round() as u64, Ordering::Relaxed);
    }

    /// Dollars spent so far.
    pub(crate) fn spent(&self) -> f64 {
        self.spent_micros.load(Ordering::Relaxed) as f64 / 1e6
    }

    /// What is left (never below nothing); `None` without a cap.
    pub(crate) fn left(&self) -> Option<f64> {
        self.limit.map(|limit| (limit - self.spent()).max(0.0))
    }

    /// Why no agent may go on, when the budget is used up: the message an agent ends
    /// with (`budget_exceeded`), the same in-process and for a child on a worker.
    pub(crate) fn used_up(&self) -> Option<String> {
        let limit = self.limit?;
        let spent = self.spent();
        (spent >= limit).then(|| {
            format!("the run's budget of ${limit:.4} is used up (spent ${spent:.4}; defaults.budget_usd)")
        })
    }

    /// Whether a child that may cost up to `cap` fits what is left; `Err` is why
    /// not, for the parent model.
    pub(crate) fn admits(&self, cap: Option<f64>) -> Result<(), String> {
        let Some(limit) = self.limit else {
            return Ok(());
        };
        let spent = self.spent();
        if spent >= limit {
            return Err(format!(
                "spawn refused: the run's budget of ${limit:.4} is used up (spent ${spent:.4})"
            ));
        }
        match cap.filter(|cap| spent + cap > limit) {
            Some(cap) => Err(format!(
                "spawn refused: it may cost up to ${cap:.4} but only ${:.4} of the run's ${limit:.4} budget is left (spent ${spent:.4})",
                limit - spent
            )),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_admits_what_fits_and_says_why_not() {
        let open = Budget::new(None);
        open.charge(1e6);
        assert!(open.admits(Some(5.0)).is_ok() && open.used_up().is_none());
        assert_eq!(open.left(), None);

        let budget = Budget::new(Some(1.0));
        budget.charge(0.25);
        assert_eq!(budget.left(), Some(0.75));
        assert!(budget.admits(None).is_ok());
        assert!(budget.admits(Some(0.75)).is_ok());
        let refused = budget.admits(Some(0.8)).unwrap_err();
        assert!(
            refused.contains("up to $0.8000 but only $0.7500"),
            "{refused}"
        );
        assert!(budget.used_up().is_none());
        budget.charge(0.75);
        assert!(budget.admits(None).unwrap_err().contains("is used up"));
        let ended = budget.used_up().unwrap();
        assert!(ended.contains("defaults.budget_usd"), "{ended}");
        assert_eq!(budget.left(), Some(0.0));
    }
}
