//! Fields whose value is a comma-separated list (RFC 9110 5.6.1), and the
//! one rule both directions of the gateway apply to `Transfer-Encoding`.

/// The elements of one field value: split at commas, the whitespace
/// around each trimmed, the empty ones (`a, , b`) left out.
pub(crate) fn elements<V: AsRef<[u8]> + ?Sized>(value: &V) -> impl Iterator<Item = &[u8]> {
    value
        .as_ref()
        .split(|&b| b == b',')
        .map(<[u8]>::trim_ascii)
        .filter(|element| !element.is_empty())
}

/// A message's transfer codings, added a `Transfer-Encoding` field at a
/// time (in a pass over all its fields, or over those alone).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct TransferCodings {
    count: usize,
    other_than_chunked: bool,
}

impl TransferCodings {
    pub(crate) fn add<V: AsRef<[u8]> + ?Sized>(&mut self, field: &V) {
        for coding in elements(field) {
            self.count += 1;
            self.other_than_chunked |= !coding.eq_ignore_ascii_case(b"chunked");
        }
    }

    /// Whether they are `chunked` once and nothing else: the only coding
    /// the gateway passes, as it frames each body again on its way and
    /// would lose any other (a `gzip, chunked` body sent on as plain
    /// bytes). nginx and Envoy refuse the others too.
    pub(crate) fn chunked_alone(&self) -> bool {
        self.count == 1 && !self.other_than_chunked
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    #[test]
    fn elements_are_trimmed_and_empty_ones_left_out() {
        let value = HeaderValue::from_static(" a ,, b\t,c , ");
        let got: Vec<&[u8]> = elements(&value).collect();
        assert_eq!(got, [&b"a"[..], b"b", b"c"]);
        assert_eq!(elements(&HeaderValue::from_static(" , ")).count(), 0);
    }

    #[test]
    fn only_chunked_once_is_chunked_alone() {
        for (fields, alone) in [
            (&["chunked"][..], true),
            (&["Chunked "][..], true),
            (&["", " chunked ,"][..], true),
            (&[][..], false),
            (&[""][..], false),
            (&["gzip, chunked"][..], false),
            (&["gzip", "chunked"][..], false),
            (&["chunked, chunked"][..], false),
            (&["chunked", "chunked"][..], false),
            (&["identity"][..], false),
        ] {
            let mut codings = TransferCodings::default();
            for field in fields {
                codings.add(&HeaderValue::from_static(field));
            }
            assert_eq!(codings.chunked_alone(), alone, "{fields:?}");
        }
    }
}
