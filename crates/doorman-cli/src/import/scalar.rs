//! YAML scalars as the original turns them into JSON (`ghodss/yaml` over
//! YAML 1.1): numbers and booleans where text belongs become text, floats
//! written as Go writes a float32; and what YAML 1.1 reads differently from
//! the YAML 1.2 we read.
//!
//! Must not: know about config fields.

use yaml_rust2::Yaml;

/// A scalar as `ghodss/yaml` turns it into text (floats as Go's
/// `FormatFloat(x, 'g', -1, 32)`).
pub fn scalar_text(v: &Yaml) -> Option<String> {
    match v {
        Yaml::String(s) => Some(s.clone()),
        Yaml::Integer(i) => Some(i.to_string()),
        Yaml::Boolean(b) => Some(b.to_string()),
        Yaml::Real(r) => Some(go_float32_text(r.parse::<f64>().unwrap_or(f64::NAN))),
        _ => None,
    }
}

/// Go's `strconv.FormatFloat(x, 'g', -1, 32)`.
pub fn go_float32_text(x: f64) -> String {
    let f = x as f32;
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (sign, mantissa) = mantissa
        .strip_prefix('-')
        .map_or(("", mantissa), |m| ("-", m));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    if !(-4..6).contains(&exp) {
        let rest = if digits.len() > 1 {
            format!(".{}", &digits[1..])
        } else {
            String::new()
        };
        let esign = if exp < 0 { '-' } else { '+' };
        return format!("{sign}{}{rest}e{esign}{:02}", &digits[..1], exp.abs());
    }
    if exp < 0 {
        return format!("{sign}0.{}{digits}", "0".repeat((-exp - 1) as usize));
    }
    let point = exp as usize + 1;
    if digits.len() <= point {
        format!("{sign}{digits}{}", "0".repeat(point - digits.len()))
    } else {
        format!("{sign}{}.{}", &digits[..point], &digits[point..])
    }
}

/// What YAML 1.1 (the original's parser) reads as a boolean and YAML 1.2
/// (ours) as text.
pub fn yaml11_bool(s: &str) -> Option<bool> {
    match s {
        "y" | "Y" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" => Some(true),
        "n" | "N" | "no" | "No" | "NO" | "off" | "Off" | "OFF" => Some(false),
        _ => None,
    }
}

/// A value's type, for messages.
pub fn kind_of(v: &Yaml) -> &'static str {
    match v {
        Yaml::Real(_) | Yaml::Integer(_) => "a number",
        Yaml::String(_) => "text",
        Yaml::Boolean(_) => "a boolean",
        Yaml::Array(_) => "a list",
        Yaml::Hash(_) => "a mapping",
        Yaml::Null => "null",
        Yaml::Alias(_) | Yaml::BadValue => "an unreadable value",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each right-hand side is what Go's `strconv.FormatFloat(x, 'g', -1, 32)`
    /// printed.
    #[test]
    fn floats_become_text_as_in_go() {
        for (x, want) in [
            (1.5, "1.5"),
            (0.1, "0.1"),
            (std::f64::consts::PI, "3.1415927"),
            (1e6, "1e+06"),
            (123456.0, "123456"),
            (1234567.0, "1.234567e+06"),
            (1e21, "1e+21"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (-2.5, "-2.5"),
            (100.0, "100"),
            (0.0, "0"),
            (1e-7, "1e-07"),
            (65536.5, "65536.5"),
        ] {
            assert_eq!(go_float32_text(x), want, "{x}");
        }
    }
}
