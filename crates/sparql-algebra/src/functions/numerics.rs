//! The functions on numbers (§17.4.4): `ABS`, `ROUND`, `CEIL`, `FLOOR` on each numeric type
//! (an integer's `ROUND`, `CEIL`, `FLOOR` is itself), and `RAND`; and the trigonometric and
//! exponential functions of XPath 3.1 (§4.8, namespace `math:`, as Jena has them): `math:pi`,
//! `exp`, `exp10`, `log`, `log10`, `pow`, `sqrt`, `sin`, `cos`, `tan`, `asin`, `acos`, `atan`,
//! `atan2`, each on any number read as an `xsd:double` and giving one (`math:sqrt(-1)` is NaN,
//! `math:log(0)` is -INF, as XPath says, not errors).

use oxsdatatypes::{Decimal, Double};

use super::{random_bytes, Args, Function, Registry, R};
use crate::value::{EvalError, Num, Val};

pub(super) fn register(r: &mut Registry) {
    r.register(Function::new("ABS", 1..=1, |a| {
        round(a, i64_abs, Decimal::checked_abs, f64::abs)
    }));
    r.register(Function::new("ROUND", 1..=1, |a| {
        round(a, Some, Decimal::checked_round, f64::round)
    }));
    r.register(Function::new("CEIL", 1..=1, |a| {
        round(a, Some, Decimal::checked_ceil, f64::ceil)
    }));
    r.register(Function::new("FLOOR", 1..=1, |a| {
        round(a, Some, Decimal::checked_floor, f64::floor)
    }));
    r.register(Function::new("RAND", 0..=0, |_| Ok(rand())).volatile());
    let double = |x: f64| Ok(Num::Db(Double::from(x)).to_val());
    r.register(Function::new(format!("{MATH}pi"), 0..=0, move |_| {
        double(std::f64::consts::PI)
    }));
    let unary: [(&str, Unary); 11] = [
        ("exp", f64::exp),
        ("exp10", |x| 10f64.powf(x)),
        ("log", f64::ln),
        ("log10", f64::log10),
        ("sqrt", f64::sqrt),
        ("sin", f64::sin),
        ("cos", f64::cos),
        ("tan", f64::tan),
        ("asin", f64::asin),
        ("acos", f64::acos),
        ("atan", f64::atan),
    ];
    for (name, f) in unary {
        r.register(Function::new(format!("{MATH}{name}"), 1..=1, move |a| {
            double(f(number(a, 0)?))
        }));
    }
    r.register(Function::new(format!("{MATH}pow"), 2..=2, move |a| {
        double(number(a, 0)?.powf(number(a, 1)?))
    }));
    // atan2(y, x), as XPath orders them.
    r.register(Function::new(format!("{MATH}atan2"), 2..=2, move |a| {
        double(number(a, 0)?.atan2(number(a, 1)?))
    }));
}

/// A function of one double.
type Unary = fn(f64) -> f64;

/// XPath's namespace of the trigonometric and exponential functions.
const MATH: &str = "http://www.w3.org/2005/xpath-functions/math#";

/// Argument `i` as a double: any number, anything else an error.
fn number(a: &Args<'_, '_>, i: usize) -> R<f64> {
    Ok(a.get(i)?.numeric().ok_or(EvalError)?.approx())
}

fn i64_abs(i: oxsdatatypes::Integer) -> Option<oxsdatatypes::Integer> {
    i.checked_abs()
}

/// One of the four on a number, by its type: `int` on an integer, `dec` on a decimal (`None`
/// past its range is an error), `float` on a float or a double.
fn round<'s>(
    a: &Args<'_, 's>,
    int: fn(oxsdatatypes::Integer) -> Option<oxsdatatypes::Integer>,
    dec: fn(Decimal) -> Option<Decimal>,
    float: fn(f64) -> f64,
) -> R<Val<'s>> {
    let n = a.get(0)?.numeric().ok_or(EvalError)?;
    Ok(match n {
        Num::I(i) => Num::I(int(i).ok_or(EvalError)?),
        Num::D(d) => Num::D(dec(d).ok_or(EvalError)?),
        Num::F(x) => Num::F((float(f64::from(f32::from(x))) as f32).into()),
        Num::Db(x) => Num::Db(float(f64::from(x)).into()),
    }
    .to_val())
}

/// `RAND()` (§17.4.4.5): an `xsd:double` in [0, 1).
fn rand() -> Val<'static> {
    let b = random_bytes();
    let bits = u64::from_le_bytes(b[..8].try_into().expect("8 bytes")) >> 11;
    let x = bits as f64 / (1u64 << 53) as f64;
    Num::Db(Double::from(x)).to_val()
}

#[cfg(test)]
mod tests {
    use super::super::tests::{call, lit};

    #[test]
    fn rounding_keeps_the_type() {
        assert_eq!(call("ROUND", &[lit("2.5", "decimal")]), Ok("3".into()));
        assert_eq!(call("CEIL", &[lit("-1.5", "double")]), Ok("-1".into()));
        assert_eq!(call("FLOOR", &[lit("7", "integer")]), Ok("7".into()));
        assert_eq!(call("ABS", &[lit("-3", "integer")]), Ok("3".into()));
        assert!(call("ABS", &[lit("-9223372036854775808", "integer")]).is_err());
        let x: f64 = call("RAND", &[]).unwrap().parse().unwrap();
        assert!((0.0..1.0).contains(&x));
    }

    #[test]
    fn xpath_math_functions_give_doubles() {
        let math = |name: &str, args: &[crate::value::Val<'_>]| {
            call(&format!("{}{name}", super::MATH), args).map(|v| v.parse::<f64>().unwrap())
        };
        assert_eq!(math("sqrt", &[lit("16", "integer")]), Ok(4.0));
        assert_eq!(
            math("pow", &[lit("2", "integer"), lit("0.5", "decimal")]),
            Ok(2f64.sqrt())
        );
        assert_eq!(math("exp10", &[lit("3", "integer")]), Ok(1000.0));
        assert_eq!(math("pi", &[]), Ok(std::f64::consts::PI));
        assert!(math("sqrt", &[lit("-1", "integer")]).unwrap().is_nan());
        assert_eq!(math("log", &[lit("0", "double")]), Ok(f64::NEG_INFINITY));
        assert_eq!(
            math("atan2", &[lit("1", "integer"), lit("0", "integer")]),
            Ok(std::f64::consts::FRAC_PI_2)
        );
        assert!(math("sqrt", &[crate::value::Val::string("4".into())]).is_err());
    }
}
