//! The functions on dates and times (§17.4.5): `NOW` and the parts of a date-time (`YEAR` …
//! `SECONDS`, `TIMEZONE`, `TZ`).
//!
//! `NOW` is one instant per run of a query (§17.4.5.1: "the same value in every call within
//! one query execution"), kept with the run's own terms ([`Minted::now`]).

use super::{typed, Function, Registry, R};
#[cfg(doc)]
use crate::minted::Minted;
use crate::value::{EvalError, Num, Temporal, Val};

pub(super) fn register(r: &mut Registry) {
    // One instant per run, but not a constant of the query text: never folded.
    r.register(
        Function::new("NOW", 0..=0, |a| {
            Ok(typed(a.minted().now().to_owned(), "dateTime"))
        })
        .volatile(),
    );
    for part in [
        "YEAR", "MONTH", "DAY", "HOURS", "MINUTES", "SECONDS", "TIMEZONE", "TZ",
    ] {
        r.register(Function::new(part, 1..=1, move |a| {
            date_part(part, &a.get(0)?)
        }));
    }
}

/// The date-time parts (§17.4.5): `YEAR` … `SECONDS`, `TIMEZONE`, `TZ`. `what` is the
/// function's name in upper case. `YEAR`, `MONTH` and `DAY` take an `xsd:date` too, the hour,
/// minutes and seconds an `xsd:time`.
fn date_part(what: &str, v: &Val<'_>) -> R<Val<'static>> {
    let t = Temporal::of(v).ok_or(EvalError)?;
    let dt = match t {
        Temporal::DateTime(d) => Some(d),
        _ => None,
    };
    Ok(match (what, t) {
        ("YEAR", Temporal::Date(d)) => Val::integer(d.year()),
        ("MONTH", Temporal::Date(d)) => Val::integer(d.month().into()),
        ("DAY", Temporal::Date(d)) => Val::integer(d.day().into()),
        ("HOURS", Temporal::Time(d)) => Val::integer(d.hour().into()),
        ("MINUTES", Temporal::Time(d)) => Val::integer(d.minute().into()),
        ("SECONDS", Temporal::Time(d)) => Num::D(d.second()).to_val(),
        ("YEAR", _) => Val::integer(dt.ok_or(EvalError)?.year()),
        ("MONTH", _) => Val::integer(dt.ok_or(EvalError)?.month().into()),
        ("DAY", _) => Val::integer(dt.ok_or(EvalError)?.day().into()),
        ("HOURS", _) => Val::integer(dt.ok_or(EvalError)?.hour().into()),
        ("MINUTES", _) => Val::integer(dt.ok_or(EvalError)?.minute().into()),
        ("SECONDS", _) => Num::D(dt.ok_or(EvalError)?.second()).to_val(),
        ("TIMEZONE", _) => {
            let tz = match t {
                Temporal::DateTime(d) => d.timezone(),
                Temporal::Date(d) => d.timezone(),
                Temporal::Time(d) => d.timezone(),
            };
            typed(tz.ok_or(EvalError)?.to_string(), "dayTimeDuration")
        }
        ("TZ", _) => {
            // The time zone as written: "Z", "+hh:mm" / "-hh:mm", or "" without one.
            let Val::Lit { value, .. } = v else {
                return Err(EvalError);
            };
            let s = value.trim();
            let tz = if s.ends_with('Z') {
                "Z"
            } else if s.len() >= 6
                && s.is_char_boundary(s.len() - 6)
                && matches!(s.as_bytes()[s.len() - 6], b'+' | b'-')
                && s.as_bytes()[s.len() - 3] == b':'
            {
                &s[s.len() - 6..]
            } else {
                ""
            };
            Val::string(tz.to_owned())
        }
        _ => return Err(EvalError),
    })
}

#[cfg(test)]
mod tests {
    use super::super::tests::{lit, text};
    use super::*;

    #[test]
    fn date_parts_of_a_date_time() {
        let d = lit("2010-06-21T11:28:01.5-05:00", "dateTime");
        let z = lit("2010-06-21T11:28:01Z", "dateTime");
        assert_eq!(text(&date_part("YEAR", &d).unwrap()), "2010");
        assert_eq!(text(&date_part("MONTH", &d).unwrap()), "6");
        assert_eq!(text(&date_part("SECONDS", &d).unwrap()), "1.5");
        assert_eq!(text(&date_part("SECONDS", &z).unwrap()), "1");
        assert_eq!(text(&date_part("TIMEZONE", &d).unwrap()), "-PT5H");
        assert_eq!(text(&date_part("TZ", &d).unwrap()), "-05:00");
        assert_eq!(text(&date_part("TZ", &z).unwrap()), "Z");
        let none = lit("2010-06-21T11:28:01", "dateTime");
        assert_eq!(text(&date_part("TZ", &none).unwrap()), "");
        assert!(date_part("TIMEZONE", &none).is_err());
        assert!(date_part("YEAR", &lit("x", "string")).is_err());
    }

    #[test]
    fn dates_compare_by_value() {
        let a = Temporal::of(&lit("1995-01-01", "date")).unwrap();
        let b = Temporal::of(&lit("1996-03-02", "date")).unwrap();
        assert_eq!(a.partial_cmp(b), Some(std::cmp::Ordering::Less));
        let t = Temporal::of(&lit("10:00:00", "time")).unwrap();
        assert_eq!(a.partial_cmp(t), None);
    }
}
