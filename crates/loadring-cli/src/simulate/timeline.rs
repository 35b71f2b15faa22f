//! In flight per endpoint over virtual time, averaged over fixed windows (for
//! the plot): the time integral of each endpoint's load, closed window by
//! window, so a curve shows what the endpoint carried, not a lucky instant.

/// Time-weighted average in-flight per endpoint, window by window.
#[derive(Debug)]
pub struct Timeline {
    endpoints: usize,
    window_ns: u64,
    windows: usize,
    /// Windows closed so far.
    closed: usize,
    load: Vec<u64>,
    last: Vec<u64>,
    /// Load x nanoseconds in the current window.
    area: Vec<u128>,
    member: Vec<bool>,
    /// `windows x endpoints`, row by row.
    averages: Vec<f32>,
    /// Per window: the mean over member endpoints (at the window's end).
    means: Vec<f32>,
}

impl Timeline {
    /// `windows` windows covering `0..=end` nanoseconds.
    pub fn new(endpoints: usize, windows: usize, end: u64, member: Vec<bool>) -> Self {
        let window_ns = (end / windows as u64 + 1).max(1);
        Timeline {
            endpoints,
            window_ns,
            windows,
            closed: 0,
            load: vec![0; endpoints],
            last: vec![0; endpoints],
            area: vec![0; endpoints],
            member,
            averages: Vec::with_capacity(windows * endpoints),
            means: Vec::with_capacity(windows),
        }
    }

    /// Closes every window that ends at or before `t`.
    #[inline]
    pub fn advance(&mut self, t: u64) {
        while self.closed < self.windows
            && t >= (self.closed as u64 + 1).saturating_mul(self.window_ns)
        {
            self.close_window();
        }
    }

    fn close_window(&mut self) {
        let end = (self.closed as u64 + 1).saturating_mul(self.window_ns);
        let (mut sum, mut members) = (0.0, 0usize);
        for e in 0..self.endpoints {
            self.area[e] += u128::from(self.load[e]) * u128::from(end - self.last[e]);
            self.last[e] = end;
            let avg = (self.area[e] as f64 / self.window_ns as f64) as f32;
            self.averages.push(avg);
            self.area[e] = 0;
            if self.member[e] {
                sum += f64::from(avg);
                members += 1;
            }
        }
        self.means.push((sum / members.max(1) as f64) as f32);
        self.closed += 1;
    }

    /// Endpoint `e` gains (`+1`) or loses (`-1`) a request at time `t`.
    #[inline]
    pub fn change(&mut self, t: u64, e: usize, up: bool) {
        self.advance(t);
        let t = t.max(self.last[e]);
        self.area[e] += u128::from(self.load[e]) * u128::from(t - self.last[e]);
        self.last[e] = t;
        if up {
            self.load[e] += 1;
        } else {
            self.load[e] -= 1;
        }
    }

    /// Endpoint `e` joins or leaves the membership (for the mean line).
    pub fn set_member(&mut self, e: usize, member: bool) {
        self.member[e] = member;
    }

    /// Closes the remaining windows; returns (averages, means, window length in ns).
    pub fn finish(mut self) -> (Vec<f32>, Vec<f32>, u64) {
        while self.closed < self.windows {
            self.close_window();
        }
        (self.averages, self.means, self.window_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn averages_weight_load_by_time() {
        // Two windows of 10 ns each (end 19).
        let mut t = Timeline::new(2, 2, 19, vec![true, true]);
        t.change(0, 0, true); // endpoint 0 holds 1 from 0..5
        t.change(5, 0, false);
        t.change(5, 1, true); // endpoint 1 holds 1 from 5 to 15, 2 from 15 to 20
        t.change(15, 1, true);
        let (avg, means, window) = t.finish();
        assert_eq!(window, 10);
        assert_eq!(avg, vec![0.5, 0.5, 0.0, 1.5]);
        assert_eq!(means, vec![0.5, 0.75]);
    }

    #[test]
    fn non_members_are_left_out_of_the_mean() {
        let mut t = Timeline::new(2, 1, 9, vec![true, true]);
        t.change(0, 0, true);
        t.change(0, 1, true);
        t.set_member(1, false);
        let (avg, means, _) = t.finish();
        assert_eq!(avg, vec![1.0, 1.0]);
        assert_eq!(means, vec![1.0]);
    }
}
