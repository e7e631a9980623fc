//! Java `DateTimeFormatter` patterns (`yyyy-MM-dd HH:mm:ss`), as SeaTunnel's
//! FORMATDATETIME, TO_CHAR, PARSEDATETIME/TO_DATE, IS_DATE and FROM_UNIXTIME use them
//! (`DateTimeFormatter.ofPattern(p)`, English names, `ResolverStyle.SMART`).
//!
//! Shared by the Sql functions and the file connectors' `date_format`, `datetime_format` and
//! `time_format`, so that a pattern means the same everywhere.
//!
//! A pattern is compiled once into tokens; formatting writes each field directly and
//! parsing reads fields with Java's widths (`MM` is exactly two digits, `M` one or more,
//! adjacent fixed-width fields such as `yyyyMMdd` split the digits), then resolves them as
//! SMART does: a day past the month's end is moved to its last day (`2021-02-30` →
//! `2021-02-28`) and `24:00` is the next midnight.

use std::fmt::Write;

use chrono::{Datelike, Duration, NaiveDate, NaiveDateTime, NaiveTime, Timelike};

/// Month names as Java's `Locale.ENGLISH` writes them, January first.
pub const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
/// Day names as Java's `Locale.ENGLISH` writes them, Monday first (ISO order).
pub const WEEKDAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];

/// One piece of a compiled pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    /// Text written (and expected) as it is.
    Lit(String),
    /// A pattern letter repeated `count` times.
    Field(char, usize),
}

/// A compiled Java date-time pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JavaPattern {
    toks: Vec<Tok>,
    /// The byte-level fast path, when the pattern has only numeric fields and literals.
    layout: Option<Layout>,
}

/// A pattern made only of numeric fields and literal text (every pattern SeaTunnel
/// documents: `yyyy-MM-dd`, `yyyyMMddHHmmss`, `yyyy-MM-dd'T'HH:mm:ss.SSS`, `HH:mm:ss`,
/// `yyyy/M/d H:mm:ss`, …), read byte by byte without allocating. It reads exactly what the
/// token parser reads (same widths, same checks); any text it does not accept goes to the
/// token parser, which then gives the error.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Layout {
    steps: Vec<Step>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    /// Literal bytes.
    Lit(Box<[u8]>),
    /// A numeric field: pattern letter, letter count, how many digits it takes.
    Num(char, usize, Width),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Width {
    /// Exactly this many digits.
    Fixed(usize),
    /// Every digit there is, up to 19, less those the adjacent fixed-width fields after it
    /// need (`yyyyMMdd`), and at least `min`.
    Greedy { min: usize, reserve: usize },
}

impl Layout {
    /// The layout of `toks`, or `None` when a token needs the token parser (month or day
    /// names, AM/PM, eras, day of year…).
    fn compile(toks: &[Tok]) -> Option<Layout> {
        let mut steps = Vec::with_capacity(toks.len());
        for (k, t) in toks.iter().enumerate() {
            steps.push(match t {
                Tok::Lit(s) => Step::Lit(s.as_bytes().into()),
                Tok::Field(c, n) => {
                    let numeric = match c {
                        'y' | 'u' | 'Y' | 'd' | 'H' | 'k' | 'm' | 's' | 'S' => true,
                        'M' | 'L' => *n <= 2,
                        _ => false,
                    };
                    if !numeric {
                        return None;
                    }
                    let width = match fixed_width(*c, *n) {
                        Some(w) => Width::Fixed(w),
                        None => Width::Greedy {
                            min: greedy_min(*c, *n),
                            reserve: reserve_after(&toks[k + 1..]),
                        },
                    };
                    Step::Num(*c, *n, width)
                }
            });
        }
        Some(Layout { steps })
    }

    /// The fields of `b`, or `None` when the token parser must look at it.
    fn parse(&self, b: &[u8]) -> Option<Parsed> {
        self.fields(b).map(|f| f.into_parsed())
    }

    /// The numeric fields of `b` as plain integers (the hot path of a column parse).
    fn fields(&self, b: &[u8]) -> Option<Fields> {
        let mut pos = 0;
        let mut f = Fields::default();
        for step in &self.steps {
            match step {
                Step::Lit(l) => {
                    if !b[pos..].starts_with(l) {
                        return None;
                    }
                    pos += l.len();
                }
                Step::Num(c, n, width) => {
                    let avail = digits_at(b, pos);
                    let w = match *width {
                        Width::Fixed(w) => w,
                        Width::Greedy { min, reserve } => {
                            let w = avail.saturating_sub(reserve).min(19);
                            if w < min {
                                return None;
                            }
                            w
                        }
                    };
                    if avail < w {
                        return None;
                    }
                    let mut v: i64 = 0;
                    for d in &b[pos..pos + w] {
                        v = v.checked_mul(10)?.checked_add(i64::from(d - b'0'))?;
                    }
                    f.set(*c, *n, w, v)?;
                    pos += w;
                }
            }
        }
        (pos == b.len()).then_some(f)
    }
}

/// The numeric fields the layout reads, without `Option`s: `has` says which were read.
#[derive(Debug, Default, Clone, Copy)]
struct Fields {
    has: u8,
    year: i64,
    month: i64,
    day: i64,
    hour: i64,
    minute: i64,
    second: i64,
    nano: i64,
}

const HAS_YEAR: u8 = 1;
const HAS_MONTH: u8 = 2;
const HAS_DAY: u8 = 4;
const HAS_HOUR: u8 = 8;
const HAS_MINUTE: u8 = 16;
const HAS_SECOND: u8 = 32;
const HAS_NANO: u8 = 64;
const HAS_DATE: u8 = HAS_YEAR | HAS_MONTH | HAS_DAY;

impl Fields {
    /// [`set_numeric`] for the letters a layout holds: the same ranges, `None` outside them.
    #[inline]
    fn set(&mut self, c: char, n: usize, width: usize, v: i64) -> Option<()> {
        let range = |lo: i64, hi: i64| (lo..=hi).contains(&v).then_some(v);
        match c {
            'y' | 'u' | 'Y' => {
                self.year = if n == 2 { 2000 + v } else { v };
                self.has |= HAS_YEAR;
            }
            'M' | 'L' => {
                self.month = range(1, 12)?;
                self.has |= HAS_MONTH;
            }
            'd' => {
                self.day = range(1, 31)?;
                self.has |= HAS_DAY;
            }
            'H' => {
                self.hour = range(0, 24)?;
                self.has |= HAS_HOUR;
            }
            'k' => {
                self.hour = range(1, 24)? % 24;
                self.has |= HAS_HOUR;
            }
            'm' => {
                self.minute = range(0, 59)?;
                self.has |= HAS_MINUTE;
            }
            's' => {
                self.second = range(0, 59)?;
                self.has |= HAS_SECOND;
            }
            'S' => {
                let scale = 10i64.pow(9u32.saturating_sub(width as u32));
                self.nano = if width <= 9 { v * scale } else { v };
                self.has |= HAS_NANO;
            }
            _ => return None,
        }
        Some(())
    }

    fn into_parsed(self) -> Parsed {
        let get = |bit: u8, v: i64| (self.has & bit != 0).then_some(v);
        Parsed {
            year: get(HAS_YEAR, self.year),
            month: get(HAS_MONTH, self.month),
            day: get(HAS_DAY, self.day),
            hour: get(HAS_HOUR, self.hour),
            minute: get(HAS_MINUTE, self.minute),
            second: get(HAS_SECOND, self.second),
            nano: get(HAS_NANO, self.nano),
            ..Parsed::default()
        }
    }

    /// Days since 1970-01-01 of a complete, valid date in years 1-9999; `None` for what
    /// needs SMART's resolving (a day past the month's end) or is missing.
    #[inline]
    fn epoch_days(&self) -> Option<i64> {
        if self.has & HAS_DATE != HAS_DATE
            || !(1..=9999).contains(&self.year)
            || self.day > days_in_month(self.year, self.month)
        {
            return None;
        }
        Some(days_from_civil(self.year, self.month, self.day))
    }

    /// Microseconds since midnight; `None` without an hour, at 24:00 (the next day) or
    /// with a fraction finer than microseconds' range.
    #[inline]
    fn day_micros(&self) -> Option<i64> {
        if self.has & HAS_HOUR == 0 || self.hour == 24 || !(0..1_000_000_000).contains(&self.nano) {
            return None;
        }
        Some(((self.hour * 60 + self.minute) * 60 + self.second) * 1_000_000 + self.nano / 1000)
    }
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn short(s: &str) -> &str {
    &s[..3]
}

/// Which letters are fields, as `DateTimeFormatterBuilder.appendPattern` reads them.
fn check_letter(c: char, n: usize, pattern: &str) -> Result<(), String> {
    let too_many = || Err(format!("too many pattern letters '{c}' in '{pattern}'"));
    match c {
        'G' | 'E' if n > 5 => too_many(),
        'y' | 'u' | 'Y' | 'n' | 'N' | 'A' | 'S' => Ok(()),
        'M' | 'L' | 'Q' | 'q' | 'e' | 'c' if n > 5 => too_many(),
        'G' | 'E' | 'M' | 'L' | 'Q' | 'q' | 'e' | 'c' | 'a' => Ok(()),
        'd' | 'H' | 'h' | 'K' | 'k' | 'm' | 's' | 'w' if n > 2 => too_many(),
        'd' | 'H' | 'h' | 'K' | 'k' | 'm' | 's' | 'w' | 'W' | 'F' => Ok(()),
        'D' if n > 3 => too_many(),
        'D' => Ok(()),
        'V' | 'z' | 'O' | 'X' | 'x' | 'Z' | 'v' => Err(format!(
            "pattern letter '{c}' in '{pattern}' needs a time zone, which SeaTunnel's local date-times do not have"
        )),
        _ => Err(format!("unknown pattern letter '{c}' in '{pattern}'")),
    }
}

impl JavaPattern {
    /// Compiles `pattern`; the error names the letter Java would reject.
    pub fn compile(pattern: &str) -> Result<Self, String> {
        let chars: Vec<char> = pattern.chars().collect();
        let mut toks: Vec<Tok> = Vec::new();
        let mut lit = String::new();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            if c == '\'' {
                // Quoted text; '' is a single quote, inside quotes or out.
                if chars.get(i + 1) == Some(&'\'') {
                    lit.push('\'');
                    i += 2;
                    continue;
                }
                i += 1;
                let mut closed = false;
                while i < chars.len() {
                    if chars[i] == '\'' {
                        if chars.get(i + 1) == Some(&'\'') {
                            lit.push('\'');
                            i += 2;
                            continue;
                        }
                        closed = true;
                        i += 1;
                        break;
                    }
                    lit.push(chars[i]);
                    i += 1;
                }
                if !closed {
                    return Err(format!("unterminated quote in '{pattern}'"));
                }
                continue;
            }
            if c.is_ascii_alphabetic() {
                let mut n = 1;
                while i + n < chars.len() && chars[i + n] == c {
                    n += 1;
                }
                check_letter(c, n, pattern)?;
                if !lit.is_empty() {
                    toks.push(Tok::Lit(std::mem::take(&mut lit)));
                }
                toks.push(Tok::Field(c, n));
                i += n;
                continue;
            }
            match c {
                // Optional sections: every field is present when formatting, so the
                // brackets only group.
                '[' | ']' => {}
                '{' | '}' | '#' => {
                    return Err(format!("reserved character '{c}' in '{pattern}'"));
                }
                other => lit.push(other),
            }
            i += 1;
        }
        if !lit.is_empty() {
            toks.push(Tok::Lit(lit));
        }
        let layout = Layout::compile(&toks);
        Ok(JavaPattern { toks, layout })
    }

    /// Writes a date and/or time; fails, as Java does, when the pattern asks for a field
    /// the value lacks (an hour of a date, a year of a time).
    pub fn format(
        &self,
        date: Option<NaiveDate>,
        time: Option<NaiveTime>,
        out: &mut String,
    ) -> Result<(), String> {
        for t in &self.toks {
            match t {
                Tok::Lit(s) => out.push_str(s),
                Tok::Field(c, n) => format_field(*c, *n, date, time, out)?,
            }
        }
        Ok(())
    }

    /// Whether the pattern is read by the byte-level fast path (numeric fields and
    /// literals only).
    pub fn has_fast_path(&self) -> bool {
        self.layout.is_some()
    }

    /// Parses `text` completely; the result has the fields the pattern gave.
    pub fn parse(&self, text: &str) -> Result<Parsed, String> {
        if let Some(p) = self.layout.as_ref().and_then(|l| l.parse(text.as_bytes())) {
            return Ok(p);
        }
        self.parse_tokens(text)
    }

    /// Microseconds since the epoch of local date-time `text`, computed straight from its
    /// bytes, when the fast path reads it completely and it needs none of SMART's
    /// adjustments; `None` means "ask [`parse`](Self::parse)", which then decides (the
    /// column parsers' hot path: no `Option` fields, no chrono).
    #[inline]
    pub fn fast_datetime_micros(&self, text: &[u8]) -> Option<i64> {
        let f = self.layout.as_ref()?.fields(text)?;
        Some(f.epoch_days()? * 86_400_000_000 + f.day_micros()?)
    }

    /// Days since the epoch of date `text`, as [`fast_datetime_micros`](Self::fast_datetime_micros)
    /// for dates.
    #[inline]
    pub fn fast_date_days(&self, text: &[u8]) -> Option<i32> {
        let f = self.layout.as_ref()?.fields(text)?;
        i32::try_from(f.epoch_days()?).ok()
    }

    /// [`parse`](Self::parse) without the fast path: the reference it must agree with.
    fn parse_tokens(&self, text: &str) -> Result<Parsed, String> {
        let b = text.as_bytes();
        let mut pos = 0;
        let mut p = Parsed::default();
        for (k, t) in self.toks.iter().enumerate() {
            match t {
                Tok::Lit(s) => {
                    if !text[pos..].starts_with(s.as_str()) {
                        return Err(format!("could not be parsed at index {pos}"));
                    }
                    pos += s.len();
                }
                Tok::Field(c, n) => {
                    pos = parse_field(*c, *n, text, b, pos, &self.toks[k + 1..], &mut p)?;
                }
            }
        }
        if pos != text.len() {
            return Err(format!("unparsed text found at index {pos}"));
        }
        Ok(p)
    }
}

fn need<T>(v: Option<T>, c: char) -> Result<T, String> {
    v.ok_or_else(|| {
        format!(
            "pattern letter '{c}' needs a {} the value does not have",
            if "GyuYMLQqdDwWEecF".contains(c) {
                "date"
            } else {
                "time"
            }
        )
    })
}

fn pad(out: &mut String, v: i64, width: usize) {
    let _ = write!(out, "{v:0width$}");
}

/// Week fields of the default (US) locale: weeks start on Sunday, week 1 holds 1 January.
fn us_week(d: NaiveDate) -> (i32, i64) {
    let start = d - Duration::days(d.weekday().num_days_from_sunday() as i64);
    let end = start + Duration::days(6);
    let year = if end.year() > d.year() {
        end.year()
    } else {
        d.year()
    };
    let jan1 = NaiveDate::from_ymd_opt(year, 1, 1).unwrap_or(d);
    let first = jan1 - Duration::days(jan1.weekday().num_days_from_sunday() as i64);
    (year, (start - first).num_days() / 7 + 1)
}

fn format_field(
    c: char,
    n: usize,
    date: Option<NaiveDate>,
    time: Option<NaiveTime>,
    out: &mut String,
) -> Result<(), String> {
    let num = |out: &mut String, v: i64| pad(out, v, if n >= 2 { n } else { 1 });
    match c {
        'G' => {
            let d = need(date, c)?;
            out.push_str(match (n, d.year() > 0) {
                (4, true) => "Anno Domini",
                (4, false) => "Before Christ",
                (5, true) => "A",
                (5, false) => "B",
                (_, true) => "AD",
                (_, false) => "BC",
            });
        }
        'y' | 'u' | 'Y' => {
            let d = need(date, c)?;
            let y = match c {
                'Y' => us_week(d).0,
                'y' if d.year() <= 0 => 1 - d.year(),
                _ => d.year(),
            } as i64;
            if n == 2 {
                pad(out, y.rem_euclid(100), 2);
            } else if n >= 4 && y > 9999 {
                // EXCEEDS_PAD: a year wider than the pattern gets a sign.
                let _ = write!(out, "+{y}");
            } else {
                pad(out, y, n);
            }
        }
        'M' | 'L' => {
            let m = need(date, c)?.month0() as usize;
            match n {
                1 | 2 => num(out, m as i64 + 1),
                3 => out.push_str(short(MONTHS[m])),
                4 => out.push_str(MONTHS[m]),
                _ => out.push_str(&MONTHS[m][..1]),
            }
        }
        'Q' | 'q' => {
            let q = need(date, c)?.month0() / 3 + 1;
            match n {
                1 | 2 => num(out, q as i64),
                3 => {
                    let _ = write!(out, "Q{q}");
                }
                4 => out.push_str(
                    ["1st quarter", "2nd quarter", "3rd quarter", "4th quarter"][q as usize - 1],
                ),
                _ => {
                    let _ = write!(out, "{q}");
                }
            }
        }
        'd' => num(out, need(date, c)?.day() as i64),
        'D' => pad(out, need(date, c)?.ordinal() as i64, n),
        'w' => num(out, us_week(need(date, c)?).1),
        'W' => {
            let d = need(date, c)?;
            let first = d.with_day(1).unwrap_or(d);
            let offset = first.weekday().num_days_from_sunday() as i64;
            pad(out, (d.day() as i64 - 1 + offset) / 7 + 1, n);
        }
        'F' => pad(out, (need(date, c)?.day() as i64 - 1) / 7 + 1, n),
        'E' | 'e' | 'c' => {
            let d = need(date, c)?;
            let w = d.weekday().num_days_from_monday() as usize;
            match (c, n) {
                ('e' | 'c', 1 | 2) => {
                    num(out, d.weekday().num_days_from_sunday() as i64 + 1);
                }
                (_, 4) => out.push_str(WEEKDAYS[w]),
                (_, 5) => out.push_str(&WEEKDAYS[w][..1]),
                _ => out.push_str(short(WEEKDAYS[w])),
            }
        }
        'a' => out.push_str(if need(time, c)?.hour() < 12 {
            "AM"
        } else {
            "PM"
        }),
        'H' => num(out, need(time, c)?.hour() as i64),
        'k' => {
            let h = need(time, c)?.hour();
            num(out, if h == 0 { 24 } else { h as i64 });
        }
        'K' => num(out, (need(time, c)?.hour() % 12) as i64),
        'h' => {
            let h = need(time, c)?.hour() % 12;
            num(out, if h == 0 { 12 } else { h as i64 });
        }
        'm' => num(out, need(time, c)?.minute() as i64),
        's' => num(out, need(time, c)?.second() as i64),
        'S' => {
            // The fraction, truncated to n digits.
            let nanos = need(time, c)?.nanosecond().min(999_999_999) as i64;
            let digits = format!("{nanos:09}");
            if n <= 9 {
                out.push_str(&digits[..n]);
            } else {
                out.push_str(&digits);
                out.extend(std::iter::repeat_n('0', n - 9));
            }
        }
        'n' => pad(out, need(time, c)?.nanosecond().min(999_999_999) as i64, n),
        'N' => {
            let t = need(time, c)?;
            let v = t.num_seconds_from_midnight() as i64 * 1_000_000_000
                + t.nanosecond().min(999_999_999) as i64;
            pad(out, v, n);
        }
        'A' => {
            let t = need(time, c)?;
            let v = t.num_seconds_from_midnight() as i64 * 1000
                + (t.nanosecond().min(999_999_999) / 1_000_000) as i64;
            pad(out, v, n);
        }
        other => return Err(format!("pattern letter '{other}' cannot be formatted")),
    }
    Ok(())
}

/// Fields read from a text.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Parsed {
    year: Option<i64>,
    month: Option<i64>,
    day: Option<i64>,
    weekday: Option<usize>,
    hour: Option<i64>,
    clock_hour: Option<i64>,
    pm: Option<bool>,
    minute: Option<i64>,
    second: Option<i64>,
    nano: Option<i64>,
}

/// Fixed digit width of a numeric field, if it has one (for adjacent value parsing).
fn fixed_width(c: char, n: usize) -> Option<usize> {
    match c {
        'y' | 'u' | 'Y' if n == 2 => Some(2),
        'y' | 'u' | 'Y' => None,
        'S' => Some(n),
        'M' | 'L' | 'd' | 'H' | 'h' | 'K' | 'k' | 'm' | 's' if n == 2 => Some(2),
        'D' if n == 3 => Some(3),
        _ => None,
    }
}

fn digits_at(b: &[u8], pos: usize) -> usize {
    b[pos..].iter().take_while(|c| c.is_ascii_digit()).count()
}

fn parse_field(
    c: char,
    n: usize,
    text: &str,
    b: &[u8],
    pos: usize,
    rest: &[Tok],
    p: &mut Parsed,
) -> Result<usize, String> {
    let bad = || format!("could not be parsed at index {pos}");
    // Text fields.
    let names = |list: &[&str], full: bool| -> Option<(usize, usize)> {
        list.iter().enumerate().find_map(|(k, name)| {
            let s = if full { *name } else { short(name) };
            text[pos..].starts_with(s).then_some((k, pos + s.len()))
        })
    };
    match (c, n) {
        ('M' | 'L', 3 | 4) => {
            let (m, end) = names(&MONTHS, n == 4).ok_or_else(bad)?;
            p.month = Some(m as i64 + 1);
            return Ok(end);
        }
        ('E', _) | ('e' | 'c', 3..) => {
            let (w, end) = names(&WEEKDAYS, n == 4).ok_or_else(bad)?;
            p.weekday = Some(w);
            return Ok(end);
        }
        ('a', _) => {
            let pm = if text[pos..].starts_with("AM") {
                false
            } else if text[pos..].starts_with("PM") {
                true
            } else {
                return Err(bad());
            };
            p.pm = Some(pm);
            return Ok(pos + 2);
        }
        ('G', _) => {
            for s in ["Anno Domini", "AD"] {
                if text[pos..].starts_with(s) {
                    return Ok(pos + s.len());
                }
            }
            return Err(bad());
        }
        _ => {}
    }
    // Numeric fields: fixed width, or greedy leaving room for adjacent fixed-width ones.
    let avail = digits_at(b, pos);
    let width = match fixed_width(c, n) {
        Some(w) => w,
        None => {
            let w = avail.saturating_sub(reserve_after(rest)).min(19);
            if w < greedy_min(c, n) {
                return Err(bad());
            }
            w
        }
    };
    if avail < width {
        return Err(bad());
    }
    let v: i64 = text[pos..pos + width].parse().map_err(|_| bad())?;
    set_numeric(c, n, width, v, p)?;
    Ok(pos + width)
}

/// Digits the fixed-width fields right after a greedy field need (`yyyyMMdd`: 4).
fn reserve_after(rest: &[Tok]) -> usize {
    let mut reserve = 0;
    for t in rest {
        match t {
            Tok::Field(c2, n2) => match fixed_width(*c2, *n2) {
                Some(w) => reserve += w,
                None => break,
            },
            Tok::Lit(_) => break,
        }
    }
    reserve
}

/// The fewest digits a greedy field takes.
fn greedy_min(c: char, n: usize) -> usize {
    if matches!(c, 'y' | 'u' | 'Y') && n >= 3 {
        n
    } else {
        n.max(1)
    }
}

/// Stores numeric field `c` (`n` letters) read as `v` from `width` digits, checking its range.
fn set_numeric(c: char, n: usize, width: usize, v: i64, p: &mut Parsed) -> Result<(), String> {
    let range = |lo: i64, hi: i64, what: &str| -> Result<i64, String> {
        if (lo..=hi).contains(&v) {
            Ok(v)
        } else {
            Err(format!(
                "invalid value for {what} (valid values {lo} - {hi}): {v}"
            ))
        }
    };
    match c {
        'y' | 'u' | 'Y' => {
            p.year = Some(if n == 2 { 2000 + v } else { v });
        }
        'M' | 'L' => p.month = Some(range(1, 12, "MonthOfYear")?),
        'd' => p.day = Some(range(1, 31, "DayOfMonth")?),
        // SMART accepts 24:00 as the next day's midnight (checked when resolving).
        'H' => p.hour = Some(range(0, 24, "HourOfDay")?),
        // SMART accepts 24 for clock-hour-of-day (k) as midnight.
        'k' => p.hour = Some(range(1, 24, "ClockHourOfDay")? % 24),
        'h' => p.clock_hour = Some(range(1, 12, "ClockHourOfAmPm")? % 12),
        'K' => p.clock_hour = Some(range(0, 11, "HourOfAmPm")?),
        'm' => p.minute = Some(range(0, 59, "MinuteOfHour")?),
        's' => p.second = Some(range(0, 59, "SecondOfMinute")?),
        'S' => {
            let scale = 10i64.pow(9u32.saturating_sub(width as u32));
            p.nano = Some(if width <= 9 { v * scale } else { v });
        }
        'n' => p.nano = Some(range(0, 999_999_999, "NanoOfSecond")?),
        other => return Err(format!("pattern letter '{other}' cannot be parsed")),
    }
    Ok(())
}

impl Parsed {
    /// The date, with SMART's day clamp (a day past the month's end is its last day).
    pub fn date(&self) -> Result<NaiveDate, String> {
        let (Some(y), Some(m), Some(d)) = (self.year, self.month, self.day) else {
            return Err("the text has no complete date (year, month and day)".into());
        };
        let y = i32::try_from(y).map_err(|_| format!("year {y} is out of range"))?;
        let mut day = d as u32;
        let date = loop {
            if let Some(date) = NaiveDate::from_ymd_opt(y, m as u32, day) {
                break date;
            }
            if day <= 28 {
                return Err(format!("invalid date {y}-{m}-{d}"));
            }
            day -= 1;
        };
        if let Some(w) = self.weekday {
            if date.weekday().num_days_from_monday() as usize != w {
                return Err(format!("conflict: {date} is not a {}", WEEKDAYS[w]));
            }
        }
        Ok(date)
    }

    /// The time of day and whether it is `24:00` (the next day's midnight).
    fn time_and_carry(&self) -> Result<(NaiveTime, bool), String> {
        let hour = match (self.hour, self.clock_hour, self.pm) {
            (Some(h), _, _) => h,
            (None, Some(h), Some(pm)) => h + if pm { 12 } else { 0 },
            (None, Some(_), None) => {
                return Err("an hour of AM/PM (h or K) needs the AM/PM marker (a)".into())
            }
            (None, None, _) => return Err("the text has no hour".into()),
        };
        let (mi, s, ns) = (
            self.minute.unwrap_or(0),
            self.second.unwrap_or(0),
            self.nano.unwrap_or(0),
        );
        if hour == 24 {
            return if (mi, s, ns) == (0, 0, 0) {
                Ok((NaiveTime::MIN, true))
            } else {
                Err(format!(
                    "invalid value for HourOfDay (valid values 0 - 23): 24:{mi:02}"
                ))
            };
        }
        let t = NaiveTime::from_hms_nano_opt(hour as u32, mi as u32, s as u32, ns as u32)
            .ok_or_else(|| format!("invalid time {hour}:{mi}:{s}"))?;
        Ok((t, false))
    }

    /// The time of day.
    pub fn time(&self) -> Result<NaiveTime, String> {
        Ok(self.time_and_carry()?.0)
    }

    /// The date and time.
    pub fn datetime(&self) -> Result<NaiveDateTime, String> {
        let (t, carry) = self.time_and_carry()?;
        let d = self.date()?;
        let dt = d.and_time(t);
        Ok(if carry { dt + Duration::days(1) } else { dt })
    }
}

/// What a parse pattern yields, as SeaTunnel decides it: with `yy` and `mm` a timestamp,
/// with `yy` a date, with `mm` a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParseKind {
    /// Date and time.
    Timestamp,
    /// Date only.
    Date,
    /// Time only.
    Time,
}

/// The kind [`ParseKind`] of a PARSEDATETIME pattern, or `None` when it has neither.
pub fn parse_kind(pattern: &str) -> Option<ParseKind> {
    match (pattern.contains("yy"), pattern.contains("mm")) {
        (true, true) => Some(ParseKind::Timestamp),
        (true, false) => Some(ParseKind::Date),
        (false, true) => Some(ParseKind::Time),
        (false, false) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fmt(p: &str, d: Option<NaiveDate>, t: Option<NaiveTime>) -> String {
        let mut s = String::new();
        JavaPattern::compile(p)
            .unwrap()
            .format(d, t, &mut s)
            .unwrap();
        s
    }

    // Expected texts are what Java 17's DateTimeFormatter.ofPattern(p).format(v) prints
    // for 2024-02-29T08:05:09.123456 (checked with a JVM).
    #[test]
    fn formats_as_java() {
        let d = NaiveDate::from_ymd_opt(2024, 2, 29);
        let t = NaiveTime::from_hms_micro_opt(8, 5, 9, 123_456);
        for (p, want) in [
            ("yyyy-MM-dd HH:mm:ss", "2024-02-29 08:05:09"),
            ("yy/M/d H:m:s", "24/2/29 8:5:9"),
            ("S", "1"),
            ("SS", "12"),
            ("SSS", "123"),
            ("SSSSSS", "123456"),
            ("SSSSSSSSS", "123456000"),
            ("EEE EEEE", "Thu Thursday"),
            ("MMM MMMM", "Feb February"),
            ("D DDD", "60 060"),
            ("h a", "8 AM"),
            ("hh:mm a", "08:05 AM"),
            ("yyyy-MM-dd'T'HH:mm:ss", "2024-02-29T08:05:09"),
            ("'quote''s' yyyy", "quote's 2024"),
            ("E, MMM d, ''yy", "Thu, Feb 29, '24"),
            ("e c", "5 5"),
            ("Q QQ", "1 01"),
            ("y yyy yyyyy", "2024 2024 02024"),
            ("uuuu", "2024"),
            ("LLL", "Feb"),
            ("k K", "8 8"),
            ("n", "123456000"),
            ("w", "9"),
            ("YYYY", "2024"),
            ("100%", "100%"),
        ] {
            assert_eq!(fmt(p, d, t), want, "{p}");
        }
        let midnight = NaiveTime::from_hms_opt(0, 5, 0);
        assert_eq!(fmt("h:mm a", d, midnight), "12:05 AM");
        assert_eq!(fmt("hh a", d, NaiveTime::from_hms_opt(12, 5, 0)), "12 PM");
    }

    #[test]
    fn rejects_what_java_rejects() {
        assert!(JavaPattern::compile("yyyy G").is_ok());
        assert!(JavaPattern::compile("yyyy b").unwrap_err().contains("'b'"));
        assert!(JavaPattern::compile("HH z").unwrap_err().contains("zone"));
        assert!(JavaPattern::compile("'open").is_err());
        assert!(JavaPattern::compile("{yyyy}").is_err());
        let p = JavaPattern::compile("yyyy HH").unwrap();
        let mut s = String::new();
        assert!(p
            .format(NaiveDate::from_ymd_opt(2020, 1, 1), None, &mut s)
            .unwrap_err()
            .contains("time"));
        assert!(p
            .format(None, NaiveTime::from_hms_opt(1, 2, 3), &mut s)
            .unwrap_err()
            .contains("date"));
    }

    fn date(p: &str, s: &str) -> Result<String, String> {
        JavaPattern::compile(p)?
            .parse(s)?
            .date()
            .map(|d| d.to_string())
    }

    // Expected results are Java 17's LocalDate.parse(s, ofPattern(p)) (SMART).
    #[test]
    fn parses_as_java_smart() {
        let p = "yyyy-MM-dd";
        assert_eq!(date(p, "2021-02-30").unwrap(), "2021-02-28");
        assert_eq!(date(p, "2021-02-29").unwrap(), "2021-02-28");
        assert_eq!(date(p, "2020-02-30").unwrap(), "2020-02-29");
        assert_eq!(date(p, "2021-04-31").unwrap(), "2021-04-30");
        assert!(date(p, "2021-02-32").unwrap_err().contains("DayOfMonth"));
        assert!(date(p, "2021-13-01").unwrap_err().contains("MonthOfYear"));
        assert!(date(p, "2021-2-8").is_err());
        assert!(date(p, "2021-04-08x").unwrap_err().contains("unparsed"));
        assert_eq!(date("yyyy-M-d", "2021-2-8").unwrap(), "2021-02-08");
        assert_eq!(date("yyyyMMdd", "20210408").unwrap(), "2021-04-08");
        assert_eq!(date("dd/MM/yyyy", "29/02/2020").unwrap(), "2020-02-29");
        assert_eq!(date("dd MMM yyyy", "08 Apr 2021").unwrap(), "2021-04-08");
        assert_eq!(
            date("EEE yyyy-MM-dd", "Thu 2021-04-08").unwrap(),
            "2021-04-08"
        );
        assert!(date("EEE yyyy-MM-dd", "Fri 2021-04-08").is_err());
        let ts = |p: &str, s: &str| {
            JavaPattern::compile(p)
                .and_then(|x| x.parse(s))
                .and_then(|x| x.datetime())
                .map(|d| d.to_string())
        };
        assert_eq!(
            ts("yyyy-MM-dd HH:mm:ss", "2021-04-08 13:34:45").unwrap(),
            "2021-04-08 13:34:45"
        );
        assert_eq!(
            ts("yyyy-MM-dd HH:mm:ss.SSS", "2021-04-08 13:34:45.123").unwrap(),
            "2021-04-08 13:34:45.123"
        );
        assert_eq!(
            ts("yyyy-MM-dd H:mm", "2021-04-08 1:34").unwrap(),
            "2021-04-08 01:34:00"
        );
        assert_eq!(
            ts("yyyy-MM-dd hh:mm a", "2021-04-08 12:30 AM").unwrap(),
            "2021-04-08 00:30:00"
        );
        assert_eq!(
            ts("yyyy-MM-dd HH:mm:ss", "2021-04-08 24:00:00").unwrap(),
            "2021-04-09 00:00:00"
        );
        assert!(ts("yyyy-MM-dd HH:mm:ss", "2021-04-08 13:34").is_err());
        assert!(ts("yyyy-MM-dd HH:mm", "2021-04-08 25:34").is_err());
    }

    #[test]
    fn parse_kinds_follow_seatunnel() {
        assert_eq!(
            parse_kind("yyyy-MM-dd HH:mm:ss"),
            Some(ParseKind::Timestamp)
        );
        assert_eq!(parse_kind("yyyy-MM-dd"), Some(ParseKind::Date));
        assert_eq!(parse_kind("HH:mm:ss"), Some(ParseKind::Time));
        assert_eq!(parse_kind("dd"), None);
    }

    /// The patterns SeaTunnel documents for `date_format`, `datetime_format` and
    /// `time_format` (`DateUtils`, `DateTimeUtils`, `TimeUtils` formatters).
    const SEATUNNEL_PATTERNS: &[&str] = &[
        "yyyy-MM-dd",
        "yyyy.MM.dd",
        "yyyy/MM/dd",
        "yyyyMMdd",
        "yyyy年MM月dd日",
        "yyyy-MM-dd HH:mm:ss",
        "yyyy-MM-dd HH:mm:ss.SSS",
        "yyyy-MM-dd HH:mm:ss.SSSSSS",
        "yyyy.MM.dd HH:mm:ss",
        "yyyy/MM/dd HH:mm:ss",
        "yyyy/M/d HH:mm",
        "yyyy-M-d HH:mm",
        "yyyy/M/d H:mm:ss",
        "yyyy-M-d H:mm:ss",
        "yyyyMMddHHmmss",
        "yyyy-MM-dd'T'HH:mm:ss",
        "yyyy-MM-dd'T'HH:mm:ss.SSS",
        "yyyy-MM-dd'T'HH:mm:ss.SSSSSS",
        "yyyy-MM-dd'T'HH:mm:ss.SSSSSSSSS",
        "yyyy年MM月dd日 HH时mm分ss秒",
        "HH:mm:ss",
        "HH:mm:ss.SSS",
    ];

    fn resolved(p: &JavaPattern, r: Result<Parsed, String>) -> Result<String, String> {
        let parsed = r?;
        let pattern: String = p
            .toks
            .iter()
            .map(|t| match t {
                Tok::Lit(s) => s.clone(),
                Tok::Field(c, n) => c.to_string().repeat(*n),
            })
            .collect();
        match parse_kind(&pattern) {
            Some(ParseKind::Timestamp) => parsed.datetime().map(|d| d.to_string()),
            Some(ParseKind::Date) => parsed.date().map(|d| d.to_string()),
            _ => parsed.time().map(|d| d.to_string()),
        }
    }

    #[test]
    fn every_seatunnel_pattern_takes_the_fast_path() {
        for p in SEATUNNEL_PATTERNS {
            assert!(JavaPattern::compile(p).unwrap().has_fast_path(), "{p}");
        }
        for p in ["dd MMM yyyy", "EEE yyyy-MM-dd", "hh:mm a", "D"] {
            assert!(!JavaPattern::compile(p).unwrap().has_fast_path(), "{p}");
        }
    }

    /// The fast path gives what the token parser gives (value or error) for valid texts,
    /// edge values and every one-character corruption of them.
    #[test]
    fn the_integer_fast_path_reads_every_day_of_four_centuries_as_chrono_does() {
        let p = JavaPattern::compile("yyyy-MM-dd'T'HH:mm:ss.SSS").unwrap();
        let dp = JavaPattern::compile("yyyyMMdd").unwrap();
        let mut d = NaiveDate::from_ymd_opt(1799, 1, 1).unwrap();
        let end = NaiveDate::from_ymd_opt(2201, 1, 1).unwrap();
        let t = NaiveTime::from_hms_milli_opt(23, 59, 58, 987).unwrap();
        let mut n = 0;
        while d < end {
            let text = d.and_time(t).format("%Y-%m-%dT%H:%M:%S%.3f").to_string();
            let want = d.and_time(t).and_utc().timestamp_micros();
            assert_eq!(
                p.fast_datetime_micros(text.as_bytes()),
                Some(want),
                "{text}"
            );
            let text = d.format("%Y%m%d").to_string();
            let days = d.num_days_from_ce() - 719_163;
            assert_eq!(dp.fast_date_days(text.as_bytes()), Some(days), "{text}");
            d = d.succ_opt().unwrap();
            n += 1;
        }
        assert!(n > 146_000);
        // SMART's adjustments and partial values are left to the full parser.
        for text in [
            "2021-02-29T00:00:00.000",
            "2021-01-01T24:00:00.000",
            "2021-01-01",
        ] {
            assert_eq!(p.fast_datetime_micros(text.as_bytes()), None, "{text}");
        }
    }

    #[test]
    fn fast_path_agrees_with_the_token_parser() {
        let d = NaiveDate::from_ymd_opt(2024, 2, 29);
        let t = NaiveTime::from_hms_micro_opt(8, 5, 9, 123_456);
        let edge_d = NaiveDate::from_ymd_opt(1999, 12, 31);
        let edge_t = NaiveTime::from_hms_opt(23, 59, 59);
        let replacements = ['0', '1', '2', '3', '5', '9', 'x', ' ', '-', ':', '.', 'T'];
        let mut checked = 0;
        for pat in SEATUNNEL_PATTERNS {
            let p = JavaPattern::compile(pat).unwrap();
            let mut texts = Vec::new();
            for (d, t) in [(d, t), (edge_d, edge_t)] {
                let mut s = String::new();
                p.format(d, t, &mut s).unwrap();
                texts.push(s);
            }
            let base = texts.clone();
            for s in &base {
                let chars: Vec<char> = s.chars().collect();
                for i in 0..chars.len() {
                    for r in replacements {
                        let mut c = chars.clone();
                        c[i] = r;
                        texts.push(c.iter().collect());
                    }
                    let mut c = chars.clone();
                    c.remove(i);
                    texts.push(c.iter().collect());
                    let mut c = chars.clone();
                    c.insert(i, '1');
                    texts.push(c.iter().collect());
                }
                texts.push(format!("{s} "));
                texts.push(format!("1{s}"));
            }
            texts.extend(
                [
                    "2021-02-30 24:00:00",
                    "2021-02-29",
                    "2021-13-01",
                    "99999-01-01",
                    "2021-1-1 1:00:00",
                    "20211301000000",
                    "2021022824000",
                    "",
                    "24:00:00",
                    "24:00:01",
                    "23:60:00",
                    "12:00:00.1234",
                    "99999999999999999999-01-01",
                ]
                .map(String::from),
            );
            for s in &texts {
                let fast = resolved(&p, p.parse(s));
                let slow = resolved(&p, p.parse_tokens(s));
                assert_eq!(fast, slow, "pattern '{pat}', text '{s}'");
                // The column parsers' integer fast path: where it answers, it answers
                // what the token parser resolves to.
                let tokens = p.parse_tokens(s);
                if let Some(us) = p.fast_datetime_micros(s.as_bytes()) {
                    let dt = tokens.as_ref().unwrap().datetime().unwrap();
                    assert_eq!(us, dt.and_utc().timestamp_micros(), "'{pat}', '{s}'");
                }
                if let Some(days) = p.fast_date_days(s.as_bytes()) {
                    let d = tokens.as_ref().unwrap().date().unwrap();
                    assert_eq!(days, d.num_days_from_ce() - 719_163, "'{pat}', '{s}'");
                }
                checked += 1;
            }
        }
        assert!(checked > 5000);
    }

    #[test]
    fn seatunnel_patterns_parse_valid_and_reject_invalid() {
        let ts = |p: &str, s: &str| {
            resolved(
                &JavaPattern::compile(p).unwrap(),
                JavaPattern::compile(p).unwrap().parse(s),
            )
        };
        for (p, s, want) in [
            (
                "yyyy-MM-dd'T'HH:mm:ss",
                "2024-02-24T14:11:08",
                "2024-02-24 14:11:08",
            ),
            (
                "yyyy-MM-dd'T'HH:mm:ss.SSS",
                "2024-02-24T14:11:08.120",
                "2024-02-24 14:11:08.120",
            ),
            ("yyyyMMddHHmmss", "20240224141108", "2024-02-24 14:11:08"),
            (
                "yyyy/M/d H:mm:ss",
                "2024/2/4 4:11:08",
                "2024-02-04 04:11:08",
            ),
            (
                "yyyy.MM.dd HH:mm:ss",
                "2024.02.24 00:00:00",
                "2024-02-24 00:00:00",
            ),
            (
                "yyyy年MM月dd日 HH时mm分ss秒",
                "2024年02月24日 14时11分08秒",
                "2024-02-24 14:11:08",
            ),
            ("yyyy-MM-dd", "2024-02-30", "2024-02-29"),
            ("yyyyMMdd", "20240101", "2024-01-01"),
            ("HH:mm:ss", "23:59:59", "23:59:59"),
            ("HH:mm:ss.SSS", "00:00:00.001", "00:00:00.001"),
            (
                "yyyy-MM-dd HH:mm:ss",
                "2024-12-31 24:00:00",
                "2025-01-01 00:00:00",
            ),
        ] {
            assert_eq!(ts(p, s).unwrap(), want, "{p} {s}");
        }
        for (p, s, err) in [
            ("yyyy-MM-dd'T'HH:mm:ss", "2024-02-24 14:11:08", "index 10"),
            ("yyyy-MM-dd'T'HH:mm:ss", "2024-02-24T14:11", "index 16"),
            (
                "yyyy-MM-dd'T'HH:mm:ss",
                "2024-02-24T14:11:08Z",
                "unparsed text",
            ),
            ("yyyy-MM-dd", "2024-2-24", "index 5"),
            ("yyyy-MM-dd", "2024-02-32", "DayOfMonth"),
            ("HH:mm:ss", "12:60:00", "MinuteOfHour"),
            ("HH:mm:ss.SSS", "12:00:00.12", "index 9"),
            ("yyyyMMddHHmmss", "2024022414110", "index 0"),
        ] {
            let e = ts(p, s).unwrap_err();
            assert!(e.contains(err), "{p} {s}: {e}");
        }
    }
}
