//! The one reading of a whole number in a specification, shared by the
//! parameter reader and the parsers of factors and sizes.

/// Reads a whole number in `min..=max`, the rule of every number of a
/// specification: ASCII decimal digits only, leading zeros ignored (`007` is
/// 7, however many zeros); no sign, space, `_`, exponent, `0x` or other
/// digits. The error is why not, to follow `key=value` in a message.
pub(crate) fn read_whole(
    value: &str,
    min: u64,
    max: u64,
) -> std::result::Result<u64, &'static str> {
    if value.is_empty() {
        return Err("is empty");
    }
    if !value.bytes().all(|b| b.is_ascii_digit()) {
        let negative = value
            .strip_prefix('-')
            .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()));
        return Err(if negative {
            "is negative"
        } else {
            "is not a whole number"
        });
    }
    // Digits only: the parse fails on overflow alone (leading zeros are
    // read as such, whatever their number).
    match value.parse::<u64>() {
        Ok(v) if (min..=max).contains(&v) => Ok(v),
        Ok(_) | Err(_) => Err("is out of range"),
    }
}
