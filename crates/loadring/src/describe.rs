//! How evenly a hashing policy divides the hash space (brpc's Describe).

use crate::endpoint::Endpoint;

/// The division of the hash space among endpoints.
///
/// `share` is the fraction of all hash codes an endpoint owns; `deviation` is
/// brpc's figure: the population standard deviation of `share * N` over the
/// `N` endpoints (0 for a perfect split, 0.1 means about 10% off the mean).
#[derive(Debug, Clone, PartialEq)]
pub struct Layout {
    shares: Vec<(Endpoint, f64)>,
    entries: usize,
    entry_label: &'static str,
}

impl Layout {
    pub(crate) fn new(
        endpoints: &[Endpoint],
        shares: Vec<f64>,
        entries: usize,
        entry_label: &'static str,
    ) -> Self {
        let shares = endpoints.iter().cloned().zip(shares).collect();
        Layout {
            shares,
            entries,
            entry_label,
        }
    }

    /// Each endpoint with its share of the hash space (the shares sum to 1).
    pub fn shares(&self) -> &[(Endpoint, f64)] {
        &self.shares
    }

    /// Number of ring points or table slots.
    pub fn entries(&self) -> usize {
        self.entries
    }

    /// What the entries are: `"points"` for rings, `"slots"` for tables.
    pub fn entry_label(&self) -> &'static str {
        self.entry_label
    }

    /// Population standard deviation of `share * N`.
    pub fn deviation(&self) -> f64 {
        let n = self.shares.len() as f64;
        if self.shares.is_empty() {
            return 0.0;
        }
        let scaled: Vec<f64> = self.shares.iter().map(|(_, s)| s * n).collect();
        let mean = scaled.iter().sum::<f64>() / n;
        (scaled.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n).sqrt()
    }

    /// The largest share times `N` (1.0 is a perfect split).
    pub fn max_over_mean(&self) -> f64 {
        let n = self.shares.len() as f64;
        self.shares.iter().map(|(_, s)| s * n).fold(0.0, f64::max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deviation_is_the_population_std_dev_of_scaled_shares() {
        let eps: Vec<Endpoint> = ["a", "b"]
            .iter()
            .map(|a| Endpoint::new(*a).unwrap())
            .collect();
        let layout = Layout::new(&eps, vec![0.75, 0.25], 10, "points");
        // scaled shares 1.5 and 0.5: mean 1, deviation 0.5
        assert!((layout.deviation() - 0.5).abs() < 1e-12);
        assert!((layout.max_over_mean() - 1.5).abs() < 1e-12);
    }
}
