//! SeaTunnel's numeric functions (`NumericFunction.java`).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Float64Array, PrimitiveArray};
use arrow::datatypes::{
    ArrowPrimitiveType, DataType, Decimal128Type, Float32Type, Float64Type, Int16Type, Int32Type,
    Int64Type, Int8Type,
};
use datafusion::common::{exec_err, Result as DFResult, ScalarValue};

use super::string::prim_out;
use super::{fn_error, ret_first, Arg, Args, SeaFn};
use crate::ret;

const F: Arg = Arg::Float;
const N: Arg = Arg::Num;
const I: Arg = Arg::Int;

pub(super) fn functions() -> Vec<SeaFn> {
    vec![
        SeaFn::new("abs", &[N], 1, ret_first, abs),
        SeaFn::new("acos", &[F], 1, ret!(DataType::Float64), |a, _| {
            f64_unary(a, "acos", |x| Ok(x.acos()))
        }),
        SeaFn::new("asin", &[F], 1, ret!(DataType::Float64), |a, _| {
            f64_unary(a, "asin", |x| Ok(x.asin()))
        }),
        SeaFn::new("atan", &[F], 1, ret!(DataType::Float64), |a, _| {
            f64_unary(a, "atan", |x| Ok(x.atan()))
        }),
        SeaFn::new("cos", &[F], 1, ret!(DataType::Float64), |a, _| {
            f64_unary(a, "cos", |x| Ok(x.cos()))
        }),
        SeaFn::new("cosh", &[F], 1, ret!(DataType::Float64), |a, _| {
            f64_unary(a, "cosh", |x| Ok(java_cosh(x)))
        }),
        SeaFn::new("cot", &[F], 1, ret!(DataType::Float64), |a, _| {
            f64_unary(a, "cot", |x| {
                let t = x.tan();
                if t == 0.0 {
                    Err("division by zero")
                } else {
                    Ok(1.0 / t)
                }
            })
        }),
        SeaFn::new("sin", &[F], 1, ret!(DataType::Float64), |a, _| {
            f64_unary(a, "sin", |x| Ok(x.sin()))
        }),
        SeaFn::new("sinh", &[F], 1, ret!(DataType::Float64), |a, _| {
            f64_unary(a, "sinh", |x| Ok(x.sinh()))
        }),
        SeaFn::new("tan", &[F], 1, ret!(DataType::Float64), |a, _| {
            f64_unary(a, "tan", |x| Ok(x.tan()))
        }),
        SeaFn::new("tanh", &[F], 1, ret!(DataType::Float64), |a, _| {
            f64_unary(a, "tanh", |x| Ok(x.tanh()))
        }),
        SeaFn::new("exp", &[F], 1, ret!(DataType::Float64), |a, _| {
            f64_unary(a, "exp", |x| Ok(x.exp()))
        }),
        SeaFn::new("ln", &[F], 1, ret!(DataType::Float64), |a, _| {
            f64_unary(a, "ln", |x| {
                if x <= 0.0 {
                    Err("argument must be positive")
                } else {
                    Ok(x.ln())
                }
            })
        }),
        SeaFn::new("log10", &[F], 1, ret!(DataType::Float64), |a, _| {
            f64_unary(a, "log10", |x| {
                if x <= 0.0 {
                    Err("argument must be positive")
                } else {
                    Ok(x.log10())
                }
            })
        }),
        SeaFn::new("radians", &[F], 1, ret!(DataType::Float64), |a, _| {
            f64_unary(a, "radians", |x| Ok(x.to_radians()))
        }),
        SeaFn::new("sqrt", &[F], 1, ret!(DataType::Float64), |a, _| {
            f64_unary(a, "sqrt", |x| Ok(x.sqrt()))
        }),
        SeaFn::new("atan2", &[F, F], 2, ret!(DataType::Float64), |a, _| {
            f64_binary(a, "atan2", |y, x| Ok(y.atan2(x)))
        }),
        SeaFn::new("power", &[F, F], 2, ret!(DataType::Float64), |a, _| {
            f64_binary(a, "power", |x, y| Ok(x.powf(y)))
        })
        .alias(&["pow"]),
        SeaFn::new("log", &[F, F], 2, ret!(DataType::Float64), |a, _| {
            f64_binary(a, "log", |base, x| {
                if base <= 0.0 {
                    Err("base must be positive")
                } else if x <= 0.0 {
                    Err("argument must be positive")
                } else if base == std::f64::consts::E {
                    Ok(x.ln())
                } else if base == 10.0 {
                    Ok(x.log10())
                } else {
                    Ok(x.ln() / base.ln())
                }
            })
        }),
        SeaFn::new("pi", &[], 0, ret!(DataType::Float64), |a, _| {
            Ok(Arc::new(Float64Array::from(vec![
                std::f64::consts::PI;
                a.rows
            ])))
        }),
        SeaFn::new(
            "mod",
            &[N, N],
            2,
            |t, _| Ok(t.get(1).cloned().unwrap_or(DataType::Null)),
            modulo,
        ),
        SeaFn::new("ceil", &[N, I], 1, ret!(DataType::Int32), |a, _| {
            ceil_floor(a, Mode::Ceiling)
        })
        .alias(&["ceiling"]),
        SeaFn::new("floor", &[N, I], 1, ret!(DataType::Int32), |a, _| {
            ceil_floor(a, Mode::Floor)
        }),
        SeaFn::new("rand", &[I], 0, ret!(DataType::Float64), random)
            .alias(&["random"])
            .volatile(),
        SeaFn::new("round", &[N, I], 1, ret_first, round),
        SeaFn::new("sign", &[N], 1, ret!(DataType::Int32), sign),
        SeaFn::new("trunc", &[N, I], 1, ret!(DataType::Float64), trunc).alias(&["truncate"]),
    ]
}

fn f64_unary(
    a: &Args,
    name: &str,
    f: impl Fn(f64) -> Result<f64, &'static str>,
) -> DFResult<ArrayRef> {
    let x = a.prim::<Float64Type>(0)?;
    prim_out::<Float64Type>(a.rows, |i| match x.get(i) {
        None => Ok(None),
        Some(v) => f(v)
            .map(Some)
            .map_err(|e| fn_error(name, format!("{e}, got {v}"))),
    })
}

fn f64_binary(
    a: &Args,
    name: &str,
    f: impl Fn(f64, f64) -> Result<f64, &'static str>,
) -> DFResult<ArrayRef> {
    let (x, y) = (a.prim::<Float64Type>(0)?, a.prim::<Float64Type>(1)?);
    prim_out::<Float64Type>(a.rows, |i| match (x.get(i), y.get(i)) {
        (Some(u), Some(v)) => f(u, v)
            .map(Some)
            .map_err(|e| fn_error(name, format!("{e}, got {u}, {v}"))),
        _ => Ok(None),
    })
}

/// The argument as an array of `rows` rows (a constant is repeated).
fn full(a: &Args, k: usize) -> DFResult<ArrayRef> {
    if a.is_scalar(k) && a.rows != 1 {
        Ok(ScalarValue::try_from_array(a.array(k), 0)?.to_array_of_size(a.rows)?)
    } else {
        Ok(a.array(k).clone())
    }
}

fn map_prim<T: ArrowPrimitiveType>(arr: &ArrayRef, f: impl Fn(T::Native) -> T::Native) -> ArrayRef {
    let p: &PrimitiveArray<T> = arr.as_primitive::<T>();
    Arc::new(p.unary::<_, T>(f).with_data_type(arr.data_type().clone()))
}

fn abs(a: &Args, _: &DataType) -> DFResult<ArrayRef> {
    let arr = full(a, 0)?;
    Ok(match arr.data_type() {
        DataType::Int8 => map_prim::<Int8Type>(&arr, |v| v.wrapping_abs()),
        DataType::Int16 => map_prim::<Int16Type>(&arr, |v| v.wrapping_abs()),
        DataType::Int32 => map_prim::<Int32Type>(&arr, |v| v.wrapping_abs()),
        DataType::Int64 => map_prim::<Int64Type>(&arr, |v| v.wrapping_abs()),
        DataType::Float32 => map_prim::<Float32Type>(&arr, |v| v.abs()),
        DataType::Float64 => map_prim::<Float64Type>(&arr, |v| v.abs()),
        DataType::Decimal128(_, _) => map_prim::<Decimal128Type>(&arr, |v| v.wrapping_abs()),
        other => return exec_err!("function ABS(): unsupported type {other}"),
    })
}

fn modulo(a: &Args, ret: &DataType) -> DFResult<ArrayRef> {
    // The remainder is taken in a type wide enough for both sides (SeaTunnel uses
    // BigDecimal), then converted to the second argument's type.
    let (lt, rt) = (a.data_type(0), a.data_type(1));
    let wide = match (lt, rt) {
        (DataType::Decimal128(_, s1), DataType::Decimal128(_, s2)) => {
            DataType::Decimal128(38, (*s1).max(*s2))
        }
        (DataType::Decimal128(_, s), t) | (t, DataType::Decimal128(_, s)) if t.is_integer() => {
            DataType::Decimal128(38, *s)
        }
        (l, r) if l.is_integer() && r.is_integer() => DataType::Int64,
        _ => DataType::Float64,
    };
    let l = arrow::compute::cast(&full(a, 0)?, &wide)?;
    let r = arrow::compute::cast(&full(a, 1)?, &wide)?;
    // SeaTunnel fails on a zero divisor of any type (a float one would give NaN here).
    if arrow::compute::cast(&r, &DataType::Float64)?
        .as_primitive::<Float64Type>()
        .iter()
        .any(|v| v == Some(0.0))
    {
        return Err(fn_error("mod", "division by zero"));
    }
    let out = if wide == DataType::Float64 {
        // A float is taken at its decimal text, as Java's `BigDecimal.valueOf(double)`:
        // MOD(13, 5.4) is 2.2, not the binary remainder 2.1999999999999993.
        let (x, y) = (
            l.as_primitive::<Float64Type>(),
            r.as_primitive::<Float64Type>(),
        );
        prim_out::<Float64Type>(x.len(), |i| {
            if x.is_null(i) || y.is_null(i) {
                return Ok(None);
            }
            decimal_rem(x.value(i), y.value(i))
                .map(Some)
                .ok_or_else(|| {
                    fn_error(
                        "mod",
                        format!("{} and {} are not finite numbers", x.value(i), y.value(i)),
                    )
                })
        })?
    } else {
        arrow::compute::kernels::numeric::rem(&l, &r).map_err(|e| fn_error("mod", e))?
    };
    Ok(if out.data_type() == ret {
        out
    } else {
        arrow::compute::cast(&out, ret)?
    })
}

/// `BigDecimal.valueOf(u).divideAndRemainder(BigDecimal.valueOf(v))[1].doubleValue()`:
/// the remainder of the two doubles' shortest decimal texts (`Double.toString`), with the
/// dividend's sign. `None` for NaN or an infinity, which `BigDecimal.valueOf` refuses.
pub(crate) fn decimal_rem(u: f64, v: f64) -> Option<f64> {
    if !u.is_finite() || !v.is_finite() {
        return None;
    }
    // Whole numbers below 2^53 are their own decimal text, and the binary remainder
    // (which is exact) is the decimal one.
    const EXACT: f64 = 9_007_199_254_740_992.0;
    if u.fract() == 0.0 && v.fract() == 0.0 && u.abs() < EXACT && v.abs() < EXACT {
        return Some(u % v);
    }
    let (Some((a, sa)), Some((b, sb))) = (shortest_decimal(u), shortest_decimal(v)) else {
        // More than 38 digits: the binary remainder is the best i128 can carry.
        return Some(u % v);
    };
    let scale = sa.max(sb);
    let align = |m: i128, s: u32| 10i128.checked_pow(scale - s).and_then(|f| m.checked_mul(f));
    match (align(a, sa), align(b, sb)) {
        (Some(a), Some(b)) if b != 0 => format!("{}e-{scale}", a % b).parse().ok(),
        _ => Some(u % v),
    }
}

/// The digits and scale of `d`'s shortest decimal text (`2.675` is 2675 at scale 3);
/// `None` when they do not fit an `i128`.
pub(crate) fn shortest_decimal(d: f64) -> Option<(i128, u32)> {
    // Rust's `Display` writes the shortest digits that read back as `d`, without an
    // exponent, as Java's `Double.toString` chooses them.
    let text = format!("{}", d.abs());
    let (int, frac) = text.split_once('.').unwrap_or((text.as_str(), ""));
    let digits = format!("{int}{frac}");
    let m: i128 = digits.parse().ok()?;
    Some((if d < 0.0 { -m } else { m }, frac.len() as u32))
}

/// Java's RoundingMode values SeaTunnel uses.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    HalfUp,
    Ceiling,
    Floor,
    Down,
}

fn round_div(v: i128, factor: i128, mode: Mode) -> i128 {
    let q = v / factor;
    let r = v % factor;
    if r == 0 {
        return q;
    }
    match mode {
        Mode::Down => q,
        Mode::Ceiling => {
            if v > 0 {
                q + 1
            } else {
                q
            }
        }
        Mode::Floor => {
            if v < 0 {
                q - 1
            } else {
                q
            }
        }
        Mode::HalfUp => {
            if r.abs() * 2 >= factor {
                q + v.signum()
            } else {
                q
            }
        }
    }
}

/// Rounds an integer to `scale` (only negative scales change it).
fn round_int(v: i64, scale: i64, mode: Mode) -> i64 {
    if !(-18..0).contains(&scale) {
        return v;
    }
    let f = 10i128.pow((-scale) as u32);
    (round_div(v as i128, f, mode) * f) as i64
}

/// Rounds a double as Java's `BigDecimal.valueOf(d).setScale(scale, mode)`: on its shortest
/// decimal text, so `round(2.675, 2)` is 2.68 and `trunc(1.005, 3)` is 1.005 as in SeaTunnel.
fn round_f64(d: f64, scale: i64, mode: Mode) -> f64 {
    Scale::new(scale).round(d, mode)
}

/// A decimal scale prepared once for many values.
#[derive(Clone, Copy)]
struct Scale {
    scale: i32,
    /// `10^|scale|`.
    p: f64,
    /// Whether `p` is exact (|scale| <= 22), which the binary shortcuts need.
    exact: bool,
}

/// 2^52: from there on a double has no fraction.
const TWO_52: f64 = 4_503_599_627_370_496.0;

impl Scale {
    fn new(scale: i64) -> Self {
        let scale = scale.clamp(-400, 400) as i32;
        Scale {
            scale,
            p: 10f64.powi(scale.abs()),
            exact: scale.abs() <= 22,
        }
    }

    /// `d × 10^scale` as a double.
    #[inline]
    fn product(self, d: f64) -> f64 {
        if self.scale >= 0 {
            d * self.p
        } else {
            d / self.p
        }
    }

    /// `r × 10^-scale`, correctly rounded (r is a whole number below 2^53).
    #[inline]
    fn unscale(self, r: f64) -> f64 {
        if self.scale >= 0 {
            r / self.p
        } else {
            r * self.p
        }
    }

    /// Rounds `d` to this scale, as Java's `BigDecimal.valueOf(d).setScale(scale, mode)`.
    fn round(self, d: f64, mode: Mode) -> f64 {
        if self.needs_text(d, mode) {
            round_text(d, self.scale, mode)
        } else {
            self.round_fast(d, mode)
        }
    }

    /// The largest distance between `x = d × 10^scale` and the same product taken on
    /// `d`'s decimal text (two roundings of about 2^-53 each, with a margin).
    #[inline]
    fn eps(ax: f64) -> f64 {
        (ax * 1e-15).max(1e-6)
    }

    /// Rounds `d` on its binary product with 10^scale, which is right unless
    /// [`Scale::needs_text`] says otherwise. It has no branch, so a column vectorizes.
    #[inline]
    fn round_fast(self, d: f64, mode: Mode) -> f64 {
        let x = self.product(d);
        let ax = x.abs();
        // The whole number nearest to |x| (adding 2^52 drops the fraction; above 2^52 a
        // double has none).
        let n = if ax < TWO_52 {
            (ax + TWO_52) - TWO_52
        } else {
            ax
        };
        let below = if n > ax { n - 1.0 } else { n };
        let above = if n < ax { n + 1.0 } else { n };
        let neg = x < 0.0;
        let mag = if (ax - n).abs() <= Self::eps(ax) {
            // d is at this scale already (needs_text checked that it is exactly n).
            n
        } else {
            match mode {
                Mode::HalfUp => n,
                Mode::Down => below,
                Mode::Ceiling => {
                    if neg {
                        below
                    } else {
                        above
                    }
                }
                Mode::Floor => {
                    if neg {
                        above
                    } else {
                        below
                    }
                }
            }
        };
        // `+ 0.0` turns -0.0 into 0.0: Java's BigDecimal has no negative zero.
        let r = self.unscale(mag.copysign(x) + 0.0);
        // NaN, infinities and values whose shortest text has no digit below 10^-scale
        // (|x| >= 10^17: at most 17 digits) stay as they are, as in Java.
        if ax < 1e17 {
            r
        } else {
            d
        }
    }

    /// Whether the binary product cannot decide and `d`'s decimal text must: for HALF_UP
    /// when `x = d × 10^scale` is (nearly) halfway between whole numbers (2.675 × 100 is
    /// 267.49999…), for the other modes when x is (nearly) whole but `d` is not exactly
    /// that number at this scale (1.005 × 1000 is 1004.9999…, yet 1.005 is 1.005).
    #[inline]
    fn needs_text(self, d: f64, mode: Mode) -> bool {
        let x = self.product(d);
        let ax = x.abs();
        if ax.is_nan() || ax >= 1e17 {
            return false;
        }
        if !self.exact {
            return true;
        }
        let n = if ax < TWO_52 {
            (ax + TWO_52) - TWO_52
        } else {
            ax
        };
        let dist = (ax - n).abs();
        let eps = Self::eps(ax);
        match mode {
            Mode::HalfUp => dist >= 0.5 - eps,
            _ => dist <= eps && (ax >= TWO_52 || self.unscale(n) != d.abs()),
        }
    }
}

/// Java's `BigDecimal.valueOf(d).setScale(scale, mode).doubleValue()`, worked on the
/// decimal digits of `d`'s shortest text (Java's `Double.toString`); for the values the
/// binary shortcut cannot decide.
#[cold]
fn round_text(d: f64, scale: i32, mode: Mode) -> f64 {
    if !d.is_finite() {
        return d;
    }
    let text = format!("{}", d.abs());
    let (ip, fp) = text.split_once('.').unwrap_or((text.as_str(), ""));
    let digits: Vec<u8> = ip.bytes().chain(fp.bytes()).collect();
    // How many leading digits stay.
    let keep = ip.len() as i64 + scale as i64;
    let (mut kept, dropped): (Vec<u8>, &[u8]) = if keep <= 0 {
        (Vec::new(), &digits[..])
    } else if keep as usize >= digits.len() {
        let mut k = digits.clone();
        k.resize(keep as usize, b'0');
        (k, &[])
    } else {
        (digits[..keep as usize].to_vec(), &digits[keep as usize..])
    };
    let first = if keep < 0 {
        b'0'
    } else {
        dropped.first().copied().unwrap_or(b'0')
    };
    let nonzero = dropped.iter().any(|b| *b != b'0');
    let neg = d < 0.0;
    let up = match mode {
        Mode::HalfUp => first >= b'5',
        Mode::Down => false,
        Mode::Ceiling => nonzero && !neg,
        Mode::Floor => nonzero && neg,
    };
    if up {
        // One more unit in the last kept place.
        let mut k = kept.len();
        loop {
            if k == 0 {
                kept.insert(0, b'1');
                break;
            }
            k -= 1;
            if kept[k] == b'9' {
                kept[k] = b'0';
            } else {
                kept[k] += 1;
                break;
            }
        }
    }
    if kept.is_empty() {
        kept.push(b'0');
    }
    let mut number = String::from_utf8(kept).unwrap_or_default();
    if scale > 0 {
        let at = number.len().saturating_sub(scale as usize);
        number.insert(at, '.');
    } else {
        number.extend(std::iter::repeat_n('0', scale.unsigned_abs() as usize));
    }
    let v: f64 = number.parse().unwrap_or(d.abs());
    if neg && v != 0.0 {
        -v
    } else {
        v
    }
}

fn scale_arg(a: &Args, i: usize) -> DFResult<i64> {
    Ok(a.opt_i64(1, i)?.unwrap_or(0))
}

/// The scale column, when there is one.
fn scale_col(a: &Args) -> Option<super::Col<'_, PrimitiveArray<Int64Type>>> {
    if a.len() > 1 {
        a.prim::<Int64Type>(1).ok()
    } else {
        None
    }
}

/// The scale when it is the same for every row (absent, or a constant as in
/// `ROUND(x, 2)`); a null scale counts as 0.
fn fixed_scale(a: &Args) -> DFResult<Option<i64>> {
    if a.len() < 2 {
        Ok(Some(0))
    } else if a.is_scalar(1) {
        Ok(Some(scale_arg(a, 0)?))
    } else {
        Ok(None)
    }
}

fn round_generic(a: &Args, mode: Mode) -> DFResult<ArrayRef> {
    let t = a.data_type(0).clone();
    let fixed = fixed_scale(a)?;
    macro_rules! ints {
        ($ty:ty, $n:ty) => {{
            match fixed {
                Some(scale) if !a.is_scalar(0) => {
                    let x = a.array(0).as_primitive::<$ty>();
                    Arc::new(x.unary::<_, $ty>(|v| round_int(v as i64, scale, mode) as $n))
                }
                _ => {
                    let x = a.prim::<$ty>(0)?;
                    let scales = scale_col(a);
                    prim_out::<$ty>(a.rows, |i| {
                        let scale = scales.as_ref().and_then(|s| s.get(i)).unwrap_or(0);
                        Ok(x.get(i).map(|v| round_int(v as i64, scale, mode) as $n))
                    })?
                }
            }
        }};
    }
    macro_rules! floats {
        ($ty:ty, $n:ty) => {{
            match fixed {
                Some(scale) if !a.is_scalar(0) => {
                    let sc = Scale::new(scale);
                    let x = a.array(0).as_primitive::<$ty>();
                    // One branch-free pass, then the rare values the binary product
                    // cannot decide again on their decimal text.
                    let out = x.unary::<_, $ty>(|v| sc.round_fast(v as f64, mode) as $n);
                    let ties = x
                        .values()
                        .iter()
                        .fold(false, |t, v| t | sc.needs_text(*v as f64, mode));
                    if ties {
                        let fixed: Vec<$n> = x
                            .values()
                            .iter()
                            .zip(out.values().iter())
                            .map(|(v, o)| {
                                if sc.needs_text(*v as f64, mode) {
                                    round_text(*v as f64, sc.scale, mode) as $n
                                } else {
                                    *o
                                }
                            })
                            .collect();
                        Arc::new(PrimitiveArray::<$ty>::new(fixed.into(), x.nulls().cloned()))
                    } else {
                        Arc::new(out)
                    }
                }
                _ => {
                    let x = a.prim::<$ty>(0)?;
                    let scales = scale_col(a);
                    prim_out::<$ty>(a.rows, |i| {
                        let scale = scales.as_ref().and_then(|s| s.get(i)).unwrap_or(0);
                        Ok(x.get(i).map(|v| round_f64(v as f64, scale, mode) as $n))
                    })?
                }
            }
        }};
    }
    Ok(match &t {
        DataType::Int8 => ints!(Int8Type, i8),
        DataType::Int16 => ints!(Int16Type, i16),
        DataType::Int32 => ints!(Int32Type, i32),
        DataType::Int64 => ints!(Int64Type, i64),
        DataType::Float32 => floats!(Float32Type, f32),
        DataType::Float64 => floats!(Float64Type, f64),
        DataType::Decimal128(p, s) => {
            let x = a.prim::<Decimal128Type>(0)?;
            let s = *s as i64;
            let out = prim_out::<Decimal128Type>(a.rows, |i| {
                Ok(x.get(i).map(|v| {
                    let scale = scale_arg(a, i).unwrap_or(0);
                    if scale >= s || s - scale > 38 {
                        v
                    } else {
                        let f = 10i128.pow((s - scale) as u32);
                        round_div(v, f, mode).saturating_mul(f)
                    }
                }))
            })?;
            Arc::new(
                out.as_primitive::<Decimal128Type>()
                    .clone()
                    .with_data_type(DataType::Decimal128(*p, s as i8)),
            )
        }
        other => return exec_err!("unsupported type {other}"),
    })
}

fn round(a: &Args, _: &DataType) -> DFResult<ArrayRef> {
    round_generic(a, Mode::HalfUp)
}

fn to_f64(arr: &ArrayRef) -> DFResult<ArrayRef> {
    Ok(arrow::compute::cast(arr, &DataType::Float64)?)
}

fn ceil_floor(a: &Args, mode: Mode) -> DFResult<ArrayRef> {
    let rounded = round_generic(a, mode)?;
    // SeaTunnel returns the rounded value's Java intValue(): doubles saturate at the int
    // range, whole numbers and decimals keep their low 32 bits.
    Ok(match rounded.data_type() {
        DataType::Float32 | DataType::Float64 => {
            let f = to_f64(&rounded)?;
            let f = f.as_primitive::<Float64Type>();
            Arc::new(f.unary::<_, Int32Type>(|v| v as i32))
        }
        DataType::Decimal128(_, s) => {
            let f = 10i128.pow((*s).max(0) as u32);
            let d = rounded.as_primitive::<Decimal128Type>();
            Arc::new(d.unary::<_, Int32Type>(|v| (v / f) as i32))
        }
        _ => {
            let l = arrow::compute::cast(&rounded, &DataType::Int64)?;
            let l = l.as_primitive::<Int64Type>();
            Arc::new(l.unary::<_, Int32Type>(|v| v as i32))
        }
    })
}

fn trunc(a: &Args, _: &DataType) -> DFResult<ArrayRef> {
    let rounded = round_generic(a, Mode::Down)?;
    to_f64(&rounded)
}

fn sign(a: &Args, _: &DataType) -> DFResult<ArrayRef> {
    let f = to_f64(a.array(0))?;
    let f = f.as_primitive::<Float64Type>();
    let scalar = a.is_scalar(0);
    prim_out::<Int32Type>(a.rows, |i| {
        let j = if scalar { 0 } else { i };
        // SeaTunnel's SIGN(NULL) is 0.
        if f.is_null(j) {
            return Ok(Some(0));
        }
        let v = f.value(j);
        Ok(Some(if v == 0.0 || v.is_nan() {
            0
        } else if v < 0.0 {
            -1
        } else {
            1
        }))
    })
}

/// Java's `Math.cosh` (fdlibm's `e_cosh.c`), whose last bit can differ from the C
/// library's (`cosh(1)` is 1.543080634815244 in Java, 1.5430806348152437 in libm).
fn java_cosh(x: f64) -> f64 {
    let ax = x.abs();
    if !ax.is_finite() {
        return ax;
    }
    if ax < 0.5 * std::f64::consts::LN_2 {
        let t = ax.exp_m1();
        let w = 1.0 + t;
        if ax < f64::powi(2.0, -55) {
            return w;
        }
        return 1.0 + (t * t) / (w + w);
    }
    if ax < 22.0 {
        let t = fdlibm_exp(ax);
        return 0.5 * t + 0.5 / t;
    }
    if ax < 709.782_712_893_384 {
        return 0.5 * fdlibm_exp(ax);
    }
    // Near overflow: exp(x/2)^2 / 2 without overflowing the intermediate.
    let w = fdlibm_exp(0.5 * ax);
    0.5 * w * w
}

/// fdlibm's `e_exp.c` (Java's `StrictMath.exp`), which `StrictMath.cosh` uses.
#[allow(clippy::excessive_precision, clippy::approx_constant)]
fn fdlibm_exp(x: f64) -> f64 {
    const LN2_HI: [f64; 2] = [6.93147180369123816490e-01, -6.93147180369123816490e-01];
    const LN2_LO: [f64; 2] = [1.90821492927058770002e-10, -1.90821492927058770002e-10];
    const INV_LN2: f64 = 1.44269504088896338700e+00;
    const P1: f64 = 1.66666666666666019037e-01;
    const P2: f64 = -2.77777777770155933842e-03;
    const P3: f64 = 6.61375632143793436117e-05;
    const P4: f64 = -1.65339022054652515390e-06;
    const P5: f64 = 4.13813679705723846039e-08;
    const TWOM1000: f64 = 9.33263618503218878990e-302;
    let hx_full = (x.to_bits() >> 32) as u32;
    let xsb = (hx_full >> 31) as usize;
    let hx = hx_full & 0x7fff_ffff;
    if hx >= 0x4086_2E42 {
        if !x.is_finite() {
            return if x.is_nan() || xsb == 0 { x } else { 0.0 };
        }
        if x > 7.09782712893383973096e+02 {
            return f64::INFINITY;
        }
        if x < -7.45133219101941108420e+02 {
            return 0.0;
        }
    }
    let (mut hi, mut lo, mut k) = (0.0, 0.0, 0i32);
    let mut x = x;
    if hx > 0x3fd6_2e42 {
        if hx < 0x3FF0_A2B2 {
            hi = x - LN2_HI[xsb];
            lo = LN2_LO[xsb];
            k = 1 - 2 * xsb as i32;
        } else {
            k = (INV_LN2 * x + if xsb == 0 { 0.5 } else { -0.5 }) as i32;
            let t = k as f64;
            hi = x - t * LN2_HI[0];
            lo = t * LN2_LO[0];
        }
        x = hi - lo;
    } else if hx < 0x3e30_0000 {
        return 1.0 + x;
    }
    let t = x * x;
    let c = x - t * (P1 + t * (P2 + t * (P3 + t * (P4 + t * P5))));
    if k == 0 {
        return 1.0 - ((x * c) / (c - 2.0) - x);
    }
    let y = 1.0 - ((lo - (x * c) / (2.0 - c)) - hi);
    let add_exp = |y: f64, k: i32| f64::from_bits((y.to_bits() as i64 + ((k as i64) << 52)) as u64);
    if k >= -1021 {
        add_exp(y, k)
    } else {
        add_exp(y, k + 1000) * TWOM1000
    }
}

/// `java.util.Random(seed).nextDouble()`, so a seeded RAND gives SeaTunnel's value.
pub(crate) fn java_random_double(seed: i64) -> f64 {
    const MUL: i64 = 0x5DEECE66D;
    const MASK: i64 = (1 << 48) - 1;
    let mut s = (seed ^ MUL) & MASK;
    let mut next = |bits: u32| -> i64 {
        s = (s.wrapping_mul(MUL).wrapping_add(0xB)) & MASK;
        (s >> (48 - bits)) as i32 as i64
    };
    let hi = next(26);
    let lo = next(27);
    ((hi << 27) + lo) as f64 * (1.0 / (1u64 << 53) as f64)
}

fn random(a: &Args, _: &DataType) -> DFResult<ArrayRef> {
    let seeded = a.len() > 0;
    prim_out::<Float64Type>(a.rows, |i| {
        if seeded {
            if let Some(seed) = a.opt_i64(0, i)? {
                return Ok(Some(java_random_double(seed as i32 as i64)));
            }
        }
        Ok(Some(rand::random::<f64>()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_half_up_on_decimal_text() {
        assert_eq!(round_f64(2.675, 2, Mode::HalfUp), 2.68);
        assert_eq!(round_f64(-2.5, 0, Mode::HalfUp), -3.0);
        assert_eq!(round_f64(1.234, 1, Mode::HalfUp), 1.2);
        assert_eq!(round_f64(1.25, 1, Mode::Down), 1.2);
        assert_eq!(round_int(155, -1, Mode::HalfUp), 160);
        assert_eq!(round_int(-155, -1, Mode::Down), -150);
    }

    /// Java's `BigDecimal.valueOf(d).setScale(scale, mode).doubleValue()`, worked on the
    /// decimal digits of `d`'s shortest text, for `scale >= 0`.
    fn text_round(d: f64, scale: usize, mode: Mode) -> f64 {
        let text = format!("{}", d.abs());
        let (ip, fp) = text.split_once('.').unwrap_or((&text, ""));
        let kept: String = format!("{ip}{:0<scale$}", &fp[..fp.len().min(scale)]);
        let dropped = fp.get(scale..).unwrap_or("");
        let nonzero = dropped.bytes().any(|b| b != b'0');
        let up = match mode {
            Mode::HalfUp => dropped.as_bytes().first().is_some_and(|b| *b >= b'5'),
            Mode::Down => false,
            Mode::Ceiling => nonzero && d > 0.0,
            Mode::Floor => nonzero && d < 0.0,
        };
        // Add one unit in the last kept place, on the digits.
        let mut digits: Vec<u8> = kept.into_bytes();
        if up {
            let mut k = digits.len();
            loop {
                if k == 0 {
                    digits.insert(0, b'1');
                    break;
                }
                k -= 1;
                if digits[k] == b'9' {
                    digits[k] = b'0';
                } else {
                    digits[k] += 1;
                    break;
                }
            }
        }
        let s = String::from_utf8(digits).unwrap_or_default();
        let (i, f) = s.split_at(s.len() - scale);
        let v: f64 = format!("{i}.{f}0").parse().unwrap_or(f64::NAN);
        if d < 0.0 && v != 0.0 {
            -v
        } else {
            v
        }
    }

    #[test]
    fn rounding_matches_java_on_decimal_text() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let modes = [Mode::HalfUp, Mode::Down, Mode::Ceiling, Mode::Floor];
        let mut values: Vec<f64> = vec![
            2.675,
            1.005,
            -1.005,
            0.125,
            -0.125,
            0.5,
            -0.5,
            1.5,
            2.5,
            -2.5,
            0.0,
            -0.0,
            0.3,
            -0.3,
            1e15 + 0.5,
            123456.785,
            9.995,
            99.995,
            1.0050000000000001,
            12.34,
            -12.34,
            4503599627370497.0,
            1e16 + 2.0,
            123456789.125,
            1e-7,
            5e-324,
        ];
        for _ in 0..40_000 {
            let mag = 10f64.powi(rng.random_range(-4..9));
            let v: f64 = rng.random_range(-1.0..1.0) * mag;
            // Also values with few decimals, where ties are frequent.
            values.push(v);
            values.push((v * 1000.0).round() / 1000.0);
        }
        for &d in &values {
            for scale in 0..6usize {
                let sc = Scale::new(scale as i64);
                for mode in modes {
                    let got = sc.round(d, mode);
                    let want = text_round(d, scale, mode);
                    assert!(
                        got == want && got.is_sign_negative() == want.is_sign_negative(),
                        "{d} scale {scale} mode {}: got {got}, Java gives {want}",
                        match mode {
                            Mode::HalfUp => "HALF_UP",
                            Mode::Down => "DOWN",
                            Mode::Ceiling => "CEILING",
                            Mode::Floor => "FLOOR",
                        }
                    );
                }
            }
            // Negative scales: the binary shortcut against the decimal digits.
            for scale in -3..0 {
                let sc = Scale::new(scale as i64);
                for mode in modes {
                    let (got, want) = (sc.round(d, mode), round_text(d, scale, mode));
                    assert!(
                        got == want,
                        "{d} scale {scale}: got {got}, text gives {want}"
                    );
                }
            }
        }
    }

    #[test]
    fn hyperbolic_functions_match_java() {
        // (x, Math.cosh, Math.sinh, Math.tanh) as Java 17 prints them.
        let cases = [
            (
                0.1,
                1.0050041680558035,
                0.10016675001984403,
                0.09966799462495582,
            ),
            (
                0.3,
                1.0453385141288605,
                0.3045202934471426,
                0.2913126124515909,
            ),
            (
                0.5,
                1.1276259652063807,
                0.5210953054937474,
                0.46211715726000974,
            ),
            (
                1.0,
                1.543080634815244,
                1.1752011936438014,
                0.7615941559557649,
            ),
            (
                2.0,
                3.7621956910836314,
                3.626860407847019,
                0.9640275800758169,
            ),
            (
                5.0,
                74.20994852478785,
                74.20321057778875,
                0.9999092042625951,
            ),
            (
                10.0,
                11013.232920103324,
                11013.232874703393,
                0.9999999958776927,
            ),
            (21.9, 1.621881641788824E9, 1.621881641788824E9, 1.0),
            (30.0, 5.343237290762231E12, 5.343237290762231E12, 1.0),
            (700.0, 5.0711602736750225E303, 5.0711602736750225E303, 1.0),
            (710.0, 1.1169973830808557E308, 1.1169973830808557E308, 1.0),
            (
                -1.0,
                1.543080634815244,
                -1.1752011936438014,
                -0.7615941559557649,
            ),
        ];
        for (x, c, s, t) in cases {
            assert_eq!((java_cosh(x), x.sinh(), x.tanh()), (c, s, t), "{x}");
        }
    }

    #[test]
    fn java_random_matches_java() {
        // new java.util.Random(42).nextDouble()
        assert_eq!(java_random_double(42), 0.7275636800328681);
    }
}
