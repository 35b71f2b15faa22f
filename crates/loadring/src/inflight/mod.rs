//! What a balancer knows of each member while requests are in flight: the
//! member record and its counters, the pool a picker sees, the outcomes and
//! load reports that come back, and the per-endpoint state that learns
//! from them.

pub(crate) mod fleet;
pub(crate) mod fleet_view;
pub(crate) mod member;
pub(crate) mod observer;
pub(crate) mod outcome;
pub(crate) mod pool;
