//! The functions on numbers (§17.4.4): `ABS`, `ROUND`, `CEIL`, `FLOOR` on each numeric type
//! (an integer's `ROUND`, `CEIL`, `FLOOR` is itself), and `RAND`.

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
}
