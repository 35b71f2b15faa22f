//! Small tools the layers above share: the parameter reader, durations,
//! random numbers, the load factor of bounded loads, the wavelet matrix.

pub(crate) mod bounded;
pub(crate) mod duration;
pub(crate) mod mt19937;
pub(crate) mod params;
pub(crate) mod rng;
pub(crate) mod wavelet;
pub(crate) mod whole;
