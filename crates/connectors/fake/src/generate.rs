//! Column-wise random data for every SeaTunnel type, driven by one seeded RNG per block
//! of rows so that any block can be regenerated on its own (resume from a checkpoint).

use std::sync::Arc;

use arrow::array::{
    ArrayRef, BinaryArray, BooleanArray, Date32Array, Decimal128Array, Float32Array, Float64Array,
    Int16Array, Int32Array, Int64Array, Int8Array, ListArray, MapArray, NullArray, StringArray,
    StructArray, Time64MicrosecondArray, TimestampMicrosecondArray,
};
use arrow::buffer::{Buffer, OffsetBuffer};
use arrow::datatypes::{DataType, TimeUnit};
use rand::{Rng, RngCore};
use rand_chacha::ChaCha8Rng;

/// How one numeric type is generated: uniformly in `[min, max]`, or picked from a list.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum NumGen<T> {
    /// Uniform in `[min, max]` (both inclusive).
    Range(T, T),
    /// One of these, uniformly.
    Template(Vec<T>),
}

/// How strings are generated.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum StringGen {
    /// Random ASCII letters, `string.length` of them (or the column's own length).
    Letters,
    /// One of these, uniformly.
    Template(Vec<String>),
}

/// Everything that shapes generated values, read from a table's options.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct GenConfig {
    pub string_length: usize,
    pub bytes_length: usize,
    pub map_size: usize,
    pub array_size: usize,
    pub string: StringGen,
    pub tinyint: NumGen<i8>,
    pub smallint: NumGen<i16>,
    pub int: NumGen<i32>,
    pub bigint: NumGen<i64>,
    pub float: NumGen<f32>,
    pub double: NumGen<f64>,
    pub years: Vec<i32>,
    pub months: Vec<u32>,
    pub days: Vec<u32>,
    pub hours: Vec<u32>,
    pub minutes: Vec<u32>,
    pub seconds: Vec<u32>,
}

impl Default for GenConfig {
    fn default() -> Self {
        GenConfig {
            string_length: 5,
            bytes_length: 5,
            map_size: 5,
            array_size: 5,
            string: StringGen::Letters,
            tinyint: NumGen::Range(0, i8::MAX),
            smallint: NumGen::Range(0, i16::MAX),
            int: NumGen::Range(0, i32::MAX),
            bigint: NumGen::Range(0, i64::MAX),
            float: NumGen::Range(0.0, f32::MAX),
            double: NumGen::Range(0.0, f64::MAX),
            years: Vec::new(),
            months: Vec::new(),
            days: Vec::new(),
            hours: Vec::new(),
            minutes: Vec::new(),
            seconds: Vec::new(),
        }
    }
}

const LETTERS: &[u8; 52] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";

/// A whether-this-type-can-be-generated check, run when the source is created so that
/// generation itself cannot meet an unsupported type.
pub(crate) fn check_type(dt: &DataType) -> Result<(), String> {
    match dt {
        DataType::Null
        | DataType::Boolean
        | DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::Float32
        | DataType::Float64
        | DataType::Utf8
        | DataType::Binary
        | DataType::Date32
        | DataType::Time64(TimeUnit::Microsecond)
        | DataType::Timestamp(TimeUnit::Microsecond, _)
        | DataType::Decimal128(_, _) => Ok(()),
        DataType::List(f) => check_type(f.data_type()),
        DataType::Struct(fields) => fields.iter().try_for_each(|f| check_type(f.data_type())),
        DataType::Map(entries, _) => match entries.data_type() {
            DataType::Struct(kv) if kv.len() == 2 => {
                if kv[0].data_type() == &DataType::Null {
                    return Err("a map's key type cannot be null".into());
                }
                check_type(kv[0].data_type())?;
                check_type(kv[1].data_type())
            }
            other => Err(format!("unsupported map entries {other}")),
        },
        other => Err(format!("FakeSource cannot generate values of type {other}")),
    }
}

fn pick<T: Copy>(rng: &mut ChaCha8Rng, list: &[T]) -> T {
    list[rng.random_range(0..list.len())]
}

fn pick_or<R: std::ops::RangeBounds<u32> + rand::distr::uniform::SampleRange<u32>>(
    rng: &mut ChaCha8Rng,
    list: &[u32],
    range: R,
) -> u32 {
    if list.is_empty() {
        rng.random_range(range)
    } else {
        pick(rng, list)
    }
}

fn ints<T, A>(rng: &mut ChaCha8Rng, n: usize, g: &NumGen<T>) -> A
where
    T: Copy + rand::distr::uniform::SampleUniform + PartialOrd,
    A: From<Vec<T>>,
{
    let v: Vec<T> = match g {
        NumGen::Range(lo, hi) => (0..n).map(|_| rng.random_range(*lo..=*hi)).collect(),
        NumGen::Template(t) => (0..n).map(|_| pick(rng, t)).collect(),
    };
    A::from(v)
}

/// Uniform in `[lo, hi]` without overflowing when the range spans most of f64.
fn lerp(lo: f64, hi: f64, u: f64) -> f64 {
    (lo * (1.0 - u) + hi * u).clamp(lo, hi)
}

/// Random ASCII letters, `len` per value, as (values, offsets) buffers.
fn letters(rng: &mut ChaCha8Rng, n: usize, len: usize) -> (OffsetBuffer<i32>, Buffer) {
    let mut bytes = vec![0u8; n * len];
    rng.fill_bytes(&mut bytes);
    for b in bytes.iter_mut() {
        // Multiply-shift maps a byte onto 0..52 without a division.
        *b = LETTERS[(*b as usize * LETTERS.len()) >> 8];
    }
    (
        OffsetBuffer::from_lengths(std::iter::repeat_n(len, n)),
        Buffer::from_vec(bytes),
    )
}

/// Days from 1970-01-01 to the given civil date (proleptic Gregorian).
pub(crate) fn days_from_civil(y: i32, m: u32, d: u32) -> i32 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let m = m as i32;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d as i32 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn days_in_month(y: i32, m: u32) -> u32 {
    match m {
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since the epoch of a random date: `year` (or a templated one), any month, days 1–28
/// unless templated (a templated day past the month's end becomes its last day).
fn random_day(rng: &mut ChaCha8Rng, g: &GenConfig, year: i32) -> i32 {
    let y = if g.years.is_empty() {
        year
    } else {
        pick(rng, &g.years)
    };
    let m = pick_or(rng, &g.months, 1..=12);
    let d = pick_or(rng, &g.days, 1..=28).min(days_in_month(y, m));
    days_from_civil(y, m, d)
}

fn random_time_micros(rng: &mut ChaCha8Rng, g: &GenConfig) -> i64 {
    let h = pick_or(rng, &g.hours, 0..24) as i64;
    let mi = pick_or(rng, &g.minutes, 0..60) as i64;
    let s = pick_or(rng, &g.seconds, 0..60) as i64;
    ((h * 60 + mi) * 60 + s) * 1_000_000
}

/// `n` random values of type `dt`. `string_length` overrides `g.string_length` for
/// this column's own strings (a `columnLength`); `year` is the year of generated dates
/// unless templated.
pub(crate) fn generate(
    rng: &mut ChaCha8Rng,
    dt: &DataType,
    n: usize,
    g: &GenConfig,
    string_length: usize,
    year: i32,
) -> Result<ArrayRef, String> {
    let err = |e: arrow::error::ArrowError| e.to_string();
    Ok(match dt {
        DataType::Null => Arc::new(NullArray::new(n)),
        DataType::Boolean => {
            let v: Vec<bool> = (0..n).map(|_| rng.random::<bool>()).collect();
            Arc::new(BooleanArray::from(v))
        }
        DataType::Int8 => Arc::new(ints::<i8, Int8Array>(rng, n, &g.tinyint)),
        DataType::Int16 => Arc::new(ints::<i16, Int16Array>(rng, n, &g.smallint)),
        DataType::Int32 => Arc::new(ints::<i32, Int32Array>(rng, n, &g.int)),
        DataType::Int64 => Arc::new(ints::<i64, Int64Array>(rng, n, &g.bigint)),
        DataType::Float32 => {
            let v: Vec<f32> = match &g.float {
                NumGen::Range(lo, hi) => (0..n)
                    .map(|_| {
                        (lerp(*lo as f64, *hi as f64, rng.random::<f64>()) as f32).clamp(*lo, *hi)
                    })
                    .collect(),
                NumGen::Template(t) => (0..n).map(|_| pick(rng, t)).collect(),
            };
            Arc::new(Float32Array::from(v))
        }
        DataType::Float64 => {
            let v: Vec<f64> = match &g.double {
                NumGen::Range(lo, hi) => (0..n)
                    .map(|_| lerp(*lo, *hi, rng.random::<f64>()))
                    .collect(),
                NumGen::Template(t) => (0..n).map(|_| pick(rng, t)).collect(),
            };
            Arc::new(Float64Array::from(v))
        }
        DataType::Utf8 => match &g.string {
            StringGen::Letters => {
                let (offsets, values) = letters(rng, n, string_length);
                Arc::new(StringArray::try_new(offsets, values, None).map_err(err)?)
            }
            StringGen::Template(t) => Arc::new(StringArray::from_iter_values(
                (0..n).map(|_| t[rng.random_range(0..t.len())].as_str()),
            )),
        },
        DataType::Binary => {
            let (offsets, values) = letters(rng, n, g.bytes_length);
            Arc::new(BinaryArray::try_new(offsets, values, None).map_err(err)?)
        }
        DataType::Decimal128(p, s) => {
            // Like SeaTunnel: p - s random integer digits and s random fraction digits,
            // i.e. an unscaled value uniform in [0, 10^p).
            let bound = 10i128.pow(*p as u32);
            let v: Vec<i128> = (0..n).map(|_| rng.random_range(0..bound)).collect();
            Arc::new(
                Decimal128Array::from(v)
                    .with_precision_and_scale(*p, *s)
                    .map_err(err)?,
            )
        }
        DataType::Date32 => {
            let v: Vec<i32> = (0..n).map(|_| random_day(rng, g, year)).collect();
            Arc::new(Date32Array::from(v))
        }
        DataType::Time64(TimeUnit::Microsecond) => {
            let v: Vec<i64> = (0..n).map(|_| random_time_micros(rng, g)).collect();
            Arc::new(Time64MicrosecondArray::from(v))
        }
        DataType::Timestamp(TimeUnit::Microsecond, tz) => {
            let v: Vec<i64> = (0..n)
                .map(|_| {
                    let day = random_day(rng, g, year) as i64;
                    day * 86_400_000_000 + random_time_micros(rng, g)
                })
                .collect();
            Arc::new(TimestampMicrosecondArray::from(v).with_timezone_opt(tz.clone()))
        }
        DataType::List(item) => {
            let child = generate(
                rng,
                item.data_type(),
                n * g.array_size,
                g,
                g.string_length,
                year,
            )?;
            let offsets = OffsetBuffer::from_lengths(std::iter::repeat_n(g.array_size, n));
            Arc::new(ListArray::try_new(item.clone(), offsets, child, None).map_err(err)?)
        }
        DataType::Map(entries, sorted) => {
            let DataType::Struct(kv) = entries.data_type() else {
                return Err(format!("unsupported map type {dt}"));
            };
            let m = n * g.map_size;
            let keys = generate(rng, kv[0].data_type(), m, g, g.string_length, year)?;
            let values = generate(rng, kv[1].data_type(), m, g, g.string_length, year)?;
            let st = StructArray::try_new(kv.clone(), vec![keys, values], None).map_err(err)?;
            let offsets = OffsetBuffer::from_lengths(std::iter::repeat_n(g.map_size, n));
            Arc::new(MapArray::try_new(entries.clone(), offsets, st, None, *sorted).map_err(err)?)
        }
        DataType::Struct(fields) => {
            let children = fields
                .iter()
                .map(|f| generate(rng, f.data_type(), n, g, g.string_length, year))
                .collect::<Result<Vec<_>, _>>()?;
            Arc::new(StructArray::try_new(fields.clone(), children, None).map_err(err)?)
        }
        other => return Err(format!("FakeSource cannot generate values of type {other}")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::{Date32Type, Decimal128Type, Int32Type, Int8Type};
    use ferry_api::types::parse_type;
    use rand::SeedableRng;

    fn rng() -> ChaCha8Rng {
        ChaCha8Rng::seed_from_u64(7)
    }

    #[test]
    fn civil_days_match_the_epoch_and_leap_years() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(
            ferry_api::value::format_date(days_from_civil(2024, 2, 29)),
            "2024-02-29"
        );
        assert_eq!(
            ferry_api::value::format_date(days_from_civil(1899, 12, 31)),
            "1899-12-31"
        );
    }

    #[test]
    fn every_type_is_generated_with_its_schema_type() {
        let g = GenConfig::default();
        for t in [
            "null",
            "string",
            "boolean",
            "tinyint",
            "smallint",
            "int",
            "bigint",
            "float",
            "double",
            "decimal(38, 18)",
            "decimal(30, 8)",
            "bytes",
            "date",
            "time",
            "timestamp",
            "timestamp_tz",
            "array<int>",
            "map<string, array<int>>",
            "map<date, string>",
            "map<string, {c_int = int, c_string = string}>",
            "{a = int, b = {c = map<string, map<string, string>>}}",
        ] {
            let dt = parse_type(t).unwrap();
            check_type(&dt).unwrap();
            let a = generate(&mut rng(), &dt, 10, &g, 5, 2024).unwrap();
            assert_eq!(a.data_type(), &dt, "{t}");
            assert_eq!(a.len(), 10, "{t}");
            if t == "null" {
                assert_eq!(a.logical_null_count(), 10);
            } else {
                assert_eq!(a.null_count(), 0, "{t}");
            }
        }
    }

    #[test]
    fn sizes_and_lengths_follow_the_config() {
        let g = GenConfig {
            string_length: 9,
            bytes_length: 3,
            map_size: 4,
            array_size: 2,
            ..GenConfig::default()
        };
        let s = generate(&mut rng(), &DataType::Utf8, 50, &g, 9, 2024).unwrap();
        assert!(
            s.as_string::<i32>()
                .iter()
                .all(|v| v
                    .is_some_and(|v| v.len() == 9 && v.bytes().all(|b| b.is_ascii_alphabetic())))
        );
        let b = generate(&mut rng(), &DataType::Binary, 5, &g, 9, 2024).unwrap();
        assert!(b
            .as_binary::<i32>()
            .iter()
            .all(|v| v.is_some_and(|v| v.len() == 3)));
        let l = generate(
            &mut rng(),
            &parse_type("array<int>").unwrap(),
            5,
            &g,
            9,
            2024,
        )
        .unwrap();
        assert_eq!(l.as_list::<i32>().value_length(4), 2);
        let m = generate(
            &mut rng(),
            &parse_type("map<int, int>").unwrap(),
            5,
            &g,
            9,
            2024,
        )
        .unwrap();
        assert_eq!(m.as_map().value_length(3), 4);
    }

    #[test]
    fn numbers_stay_in_range_and_templates_are_honoured() {
        let g = GenConfig {
            tinyint: NumGen::Range(-3, 3),
            int: NumGen::Template(vec![20, 21]),
            double: NumGen::Range(-f64::MAX, f64::MAX),
            ..GenConfig::default()
        };
        let t = generate(&mut rng(), &DataType::Int8, 1000, &g, 5, 2024).unwrap();
        let t = t.as_primitive::<Int8Type>();
        assert!(t.values().iter().all(|v| (-3..=3).contains(v)));
        assert!(
            t.values().contains(&-3) && t.values().contains(&3),
            "both ends are reachable"
        );
        let i = generate(&mut rng(), &DataType::Int32, 100, &g, 5, 2024).unwrap();
        assert!(i
            .as_primitive::<Int32Type>()
            .values()
            .iter()
            .all(|v| *v == 20 || *v == 21));
        let d = generate(&mut rng(), &DataType::Float64, 100, &g, 5, 2024).unwrap();
        assert!(d
            .as_primitive::<arrow::datatypes::Float64Type>()
            .values()
            .iter()
            .all(|v| v.is_finite()));
    }

    #[test]
    fn decimals_fit_their_precision() {
        let dt = DataType::Decimal128(5, 2);
        let a = generate(&mut rng(), &dt, 500, &GenConfig::default(), 5, 2024).unwrap();
        assert!(a
            .as_primitive::<Decimal128Type>()
            .values()
            .iter()
            .all(|v| (0..100_000).contains(v)));
    }

    #[test]
    fn dates_use_the_year_and_templates() {
        let g = GenConfig {
            months: vec![2],
            days: vec![31],
            ..GenConfig::default()
        };
        let a = generate(&mut rng(), &DataType::Date32, 20, &g, 2023, 2023).unwrap();
        for d in a.as_primitive::<Date32Type>().values().iter() {
            assert_eq!(ferry_api::value::format_date(*d), "2023-02-28");
        }
        let g = GenConfig {
            hours: vec![12],
            minutes: vec![34],
            seconds: vec![56],
            ..GenConfig::default()
        };
        let t = generate(&mut rng(), &ferry_api::types::TIME_TYPE, 3, &g, 5, 2023).unwrap();
        assert_eq!(
            ferry_api::value::array_value_to_json(
                t.as_ref(),
                0,
                ferry_api::value::RowStyle::Positional
            ),
            "12:34:56"
        );
    }

    #[test]
    fn map_keys_cannot_be_null() {
        assert!(check_type(&parse_type("map<null, int>").unwrap())
            .unwrap_err()
            .contains("key type"));
    }
}
