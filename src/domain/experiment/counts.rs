//! What an arm counted: on the request path in atomics, as a snapshot to store and
//! report.

use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

/// An arm's counters on this node, bumped without a lock.
#[derive(Debug, Default)]
pub struct ArmCounters {
    /// Responses the arm served.
    requests: AtomicU64,
    /// Items returned in those responses.
    impressions: AtomicU64,
    /// New click events whose `rec_id` names the arm.
    clicks: AtomicU64,
    /// New conversion events whose `rec_id` names the arm.
    conversions: AtomicU64,
}

/// An arm's counts at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ArmCounts {
    /// Responses the arm served.
    pub requests: u64,
    /// Items returned in those responses.
    pub impressions: u64,
    /// New click events whose `rec_id` names the arm.
    pub clicks: u64,
    /// New conversion events whose `rec_id` names the arm.
    pub conversions: u64,
}

impl ArmCounters {
    /// Counters that start from stored counts.
    pub fn starting_at(counts: ArmCounts) -> ArmCounters {
        ArmCounters {
            requests: AtomicU64::new(counts.requests),
            impressions: AtomicU64::new(counts.impressions),
            clicks: AtomicU64::new(counts.clicks),
            conversions: AtomicU64::new(counts.conversions),
        }
    }

    /// One response and the items it returned.
    pub fn served(&self, impressions: usize) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.impressions.fetch_add(impressions as u64, Ordering::Relaxed);
    }

    pub fn clicked(&self) {
        self.clicks.fetch_add(1, Ordering::Relaxed);
    }

    pub fn converted(&self) {
        self.conversions.fetch_add(1, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> ArmCounts {
        ArmCounts {
            requests: self.requests.load(Ordering::Relaxed),
            impressions: self.impressions.load(Ordering::Relaxed),
            clicks: self.clicks.load(Ordering::Relaxed),
            conversions: self.conversions.load(Ordering::Relaxed),
        }
    }
}

impl std::ops::AddAssign for ArmCounts {
    fn add_assign(&mut self, other: ArmCounts) {
        self.requests += other.requests;
        self.impressions += other.impressions;
        self.clicks += other.clicks;
        self.conversions += other.conversions;
    }
}
