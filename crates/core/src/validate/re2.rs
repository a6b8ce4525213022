//! The RE2 dialect Envoy runs, as a check over the syntax tree of a regular expression the Rust
//! `regex` crate already accepts.
//!
//! The two dialects share most of their syntax, but not all of it. Where Rust's accepts more,
//! Envoy refuses the whole route configuration that holds the expression (a NACK: no route of that
//! configuration changes until the expression is gone), or reads the same text with another
//! meaning. So the webhook refuses, with the construct and its RE2 spelling, what RE2 would not
//! read the same way:
//!
//! - flags other than `i`, `m`, `s` and `U` (`x`, `u` and `R` are Rust's only);
//! - `\u` / `\U` escapes (RE2 spells a code point `\x{...}`), and escapes of code points above
//!   `\x{FF}`: Envoy compiles its expressions as Latin-1 and refuses them (a character written
//!   as itself is its UTF-8 bytes, which match the same bytes of a header value);
//! - Unicode classes by a name RE2 does not know: RE2 knows general categories by their
//!   abbreviation (`\p{Lu}`, `\pL`), scripts by their name (`\p{Greek}`), and `Any`; Rust also
//!   takes long names, binary properties and `name=value` forms;
//! - class set operations (`&&`, `--`, `~~`) and classes nested in classes, which RE2 reads as
//!   literal characters;
//! - the word-boundary forms `\b{start}`, `\b{end}`, `\<`, `\>` and their halves;
//! - repetition counts above 1000, and repetitions nested so that their counts multiply past 1000
//!   (RE2's parser refuses both: "bad repetition operator", "invalid repetition size").
//!
//! What is left is how big RE2's compiled program gets; that is bounded by the size limit the
//! caller compiles with and by the limit sluice's Envoy bootstrap sets ([`crate::translate::
//! RE2_MAX_PROGRAM_SIZE`]).

use regex_syntax::ast::{
    self, Assertion, AssertionKind, Ast, ClassSetBinaryOp, ClassSetItem, ClassUnicode,
    ClassUnicodeKind, Flag, Flags, FlagsItemKind, GroupKind, HexLiteralKind, Literal, LiteralKind,
    RepetitionKind, RepetitionRange, Visitor,
};

/// The largest code point Envoy's RE2 takes as an escape (`\x{FF}`): Envoy compiles expressions
/// as Latin-1, one character per byte.
pub const MAX_ESCAPED: u32 = 0xFF;

/// RE2's largest repetition count, and the largest product of nested counts.
pub const MAX_REPEAT: u32 = 1000;

/// Unicode class names RE2 knows: general category abbreviations, `Any`, and script names.
///
/// The Unicode scripts regex-syntax knows, kept where RE2 (the version in Envoy 1.40) takes them;
/// `tests/envoy_validate.rs` has Envoy check every one.
const UNICODE_NAMES: &[&str] = &[
    "Adlam",
    "Ahom",
    "Anatolian_Hieroglyphs",
    "Any",
    "Arabic",
    "Armenian",
    "Avestan",
    "Balinese",
    "Bamum",
    "Bassa_Vah",
    "Batak",
    "Bengali",
    "Bhaiksuki",
    "Bopomofo",
    "Brahmi",
    "Braille",
    "Buginese",
    "Buhid",
    "C",
    "Canadian_Aboriginal",
    "Carian",
    "Caucasian_Albanian",
    "Cc",
    "Cf",
    "Chakma",
    "Cham",
    "Cherokee",
    "Chorasmian",
    "Co",
    "Common",
    "Coptic",
    "Cuneiform",
    "Cypriot",
    "Cypro_Minoan",
    "Cyrillic",
    "Deseret",
    "Devanagari",
    "Dives_Akuru",
    "Dogra",
    "Duployan",
    "Egyptian_Hieroglyphs",
    "Elbasan",
    "Elymaic",
    "Ethiopic",
    "Georgian",
    "Glagolitic",
    "Gothic",
    "Grantha",
    "Greek",
    "Gujarati",
    "Gunjala_Gondi",
    "Gurmukhi",
    "Han",
    "Hangul",
    "Hanifi_Rohingya",
    "Hanunoo",
    "Hatran",
    "Hebrew",
    "Hiragana",
    "Imperial_Aramaic",
    "Inherited",
    "Inscriptional_Pahlavi",
    "Inscriptional_Parthian",
    "Javanese",
    "Kaithi",
    "Kannada",
    "Katakana",
    "Kawi",
    "Kayah_Li",
    "Kharoshthi",
    "Khitan_Small_Script",
    "Khmer",
    "Khojki",
    "Khudawadi",
    "L",
    "Lao",
    "Latin",
    "Lepcha",
    "Limbu",
    "Linear_A",
    "Linear_B",
    "Lisu",
    "Ll",
    "Lm",
    "Lo",
    "Lt",
    "Lu",
    "Lycian",
    "Lydian",
    "M",
    "Mahajani",
    "Makasar",
    "Malayalam",
    "Mandaic",
    "Manichaean",
    "Marchen",
    "Masaram_Gondi",
    "Mc",
    "Me",
    "Medefaidrin",
    "Meetei_Mayek",
    "Mende_Kikakui",
    "Meroitic_Cursive",
    "Meroitic_Hieroglyphs",
    "Miao",
    "Mn",
    "Modi",
    "Mongolian",
    "Mro",
    "Multani",
    "Myanmar",
    "N",
    "Nabataean",
    "Nag_Mundari",
    "Nandinagari",
    "Nd",
    "New_Tai_Lue",
    "Newa",
    "Nko",
    "Nl",
    "No",
    "Nushu",
    "Nyiakeng_Puachue_Hmong",
    "Ogham",
    "Ol_Chiki",
    "Old_Hungarian",
    "Old_Italic",
    "Old_North_Arabian",
    "Old_Permic",
    "Old_Persian",
    "Old_Sogdian",
    "Old_South_Arabian",
    "Old_Turkic",
    "Old_Uyghur",
    "Oriya",
    "Osage",
    "Osmanya",
    "P",
    "Pahawh_Hmong",
    "Palmyrene",
    "Pau_Cin_Hau",
    "Pc",
    "Pd",
    "Pe",
    "Pf",
    "Phags_Pa",
    "Phoenician",
    "Pi",
    "Po",
    "Ps",
    "Psalter_Pahlavi",
    "Rejang",
    "Runic",
    "S",
    "Samaritan",
    "Saurashtra",
    "Sc",
    "Sharada",
    "Shavian",
    "Siddham",
    "SignWriting",
    "Sinhala",
    "Sk",
    "Sm",
    "So",
    "Sogdian",
    "Sora_Sompeng",
    "Soyombo",
    "Sundanese",
    "Syloti_Nagri",
    "Syriac",
    "Tagalog",
    "Tagbanwa",
    "Tai_Le",
    "Tai_Tham",
    "Tai_Viet",
    "Takri",
    "Tamil",
    "Tangsa",
    "Tangut",
    "Telugu",
    "Thaana",
    "Thai",
    "Tibetan",
    "Tifinagh",
    "Tirhuta",
    "Toto",
    "Ugaritic",
    "Vai",
    "Vithkuqi",
    "Wancho",
    "Warang_Citi",
    "Yezidi",
    "Yi",
    "Z",
    "Zanabazar_Square",
    "Zl",
    "Zp",
    "Zs",
];

/// Every Unicode class name RE2 takes (for tests that have Envoy check them).
pub fn unicode_names() -> &'static [&'static str] {
    UNICODE_NAMES
}

/// Why RE2 would refuse `pattern` or read it otherwise than Rust's `regex` crate: the first
/// construct found, with its RE2 spelling where there is one. None when RE2 reads it alike, and
/// when it does not parse at all (compiling it with `regex` says why).
pub fn check(pattern: &str) -> Option<String> {
    let ast = ast::parse::Parser::new().parse(pattern).ok()?;
    ast::visit(
        &ast,
        Dialect {
            budgets: vec![MAX_REPEAT],
        },
    )
    .err()
}

/// Whether Envoy's Latin-1 reading of `pattern` can differ from a Unicode one for non-ASCII
/// values: it has a Unicode class (`\\pL`, `\\p{Greek}`), which Envoy matches only up to `\\xFF`,
/// or a non-ASCII character, which Envoy matches as its UTF-8 bytes, one per character. False
/// when it does not parse.
pub fn reads_non_ascii(pattern: &str) -> bool {
    struct NonAscii;
    impl Visitor for NonAscii {
        type Output = ();
        type Err = ();
        fn finish(self) -> Result<(), ()> {
            Ok(())
        }
        fn visit_pre(&mut self, ast: &Ast) -> Result<(), ()> {
            match ast {
                Ast::ClassUnicode(_) => Err(()),
                Ast::Literal(l) if !l.c.is_ascii() => Err(()),
                _ => Ok(()),
            }
        }
        fn visit_class_set_item_pre(&mut self, item: &ClassSetItem) -> Result<(), ()> {
            match item {
                ClassSetItem::Unicode(_) => Err(()),
                ClassSetItem::Literal(l) if !l.c.is_ascii() => Err(()),
                ClassSetItem::Range(r) if !r.end.c.is_ascii() => Err(()),
                _ => Ok(()),
            }
        }
    }
    ast::parse::Parser::new()
        .parse(pattern)
        .is_ok_and(|ast| ast::visit(&ast, NonAscii).is_err())
}

/// Walks the tree; the error is the message.
struct Dialect {
    /// RE2's count of repetitions left at each enclosing repetition: 1000, divided by the count
    /// of each repetition on the way down (integer division, as RE2's parser does).
    budgets: Vec<u32>,
}

impl Visitor for Dialect {
    type Output = ();
    type Err = String;

    fn finish(self) -> Result<(), String> {
        Ok(())
    }

    fn visit_pre(&mut self, ast: &Ast) -> Result<(), String> {
        match ast {
            Ast::Flags(f) => flags(&f.flags),
            Ast::Group(g) => match &g.kind {
                GroupKind::NonCapturing(f) => flags(f),
                GroupKind::CaptureIndex(_) | GroupKind::CaptureName { .. } => Ok(()),
            },
            Ast::Literal(l) => literal(l),
            Ast::Assertion(a) => assertion(a),
            Ast::ClassUnicode(c) => unicode_class(c),
            Ast::Repetition(r) => {
                let count = match &r.op.kind {
                    RepetitionKind::Range(
                        RepetitionRange::Exactly(n) | RepetitionRange::AtLeast(n),
                    ) => *n,
                    RepetitionKind::Range(RepetitionRange::Bounded(lo, hi)) => {
                        if *lo > MAX_REPEAT {
                            return Err(too_many(*lo));
                        }
                        *hi
                    }
                    _ => 0,
                };
                if count > MAX_REPEAT {
                    return Err(too_many(count));
                }
                let outer = *self.budgets.last().unwrap_or(&MAX_REPEAT);
                let left = outer.checked_div(count).unwrap_or(outer);
                if left == 0 {
                    return Err(format!(
                        "nests repetitions whose counts multiply to more than {MAX_REPEAT}, which \
                         RE2 (Envoy's regex engine) refuses; use `+` or `*` for one of them"
                    ));
                }
                self.budgets.push(left);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn visit_post(&mut self, ast: &Ast) -> Result<(), String> {
        if let Ast::Repetition(_) = ast {
            self.budgets.pop();
        }
        Ok(())
    }

    fn visit_class_set_item_pre(&mut self, item: &ClassSetItem) -> Result<(), String> {
        match item {
            ClassSetItem::Literal(l) => literal(l),
            ClassSetItem::Range(r) => literal(&r.start).and_then(|()| literal(&r.end)),
            ClassSetItem::Unicode(c) => unicode_class(c),
            ClassSetItem::Bracketed(_) => Err(
                "nests a character class in a class, which RE2 (Envoy's regex engine) reads as \
                 the literal characters `[` and `]`; write one class, like `[a-z0-9]`"
                    .to_string(),
            ),
            _ => Ok(()),
        }
    }

    fn visit_class_set_binary_op_pre(&mut self, op: &ClassSetBinaryOp) -> Result<(), String> {
        let spelled = match op.kind {
            ast::ClassSetBinaryOpKind::Intersection => "&&",
            ast::ClassSetBinaryOpKind::Difference => "--",
            ast::ClassSetBinaryOpKind::SymmetricDifference => "~~",
        };
        Err(format!(
            "uses the class operation `{spelled}`, which RE2 (Envoy's regex engine) reads as \
             literal characters; list the characters of the class instead"
        ))
    }
}

fn too_many(count: u32) -> String {
    format!(
        "repeats {count} times; RE2 (Envoy's regex engine) allows at most {MAX_REPEAT}: use a \
         smaller count, or `+` or `*`"
    )
}

fn flags(f: &Flags) -> Result<(), String> {
    for item in &f.items {
        let FlagsItemKind::Flag(flag) = &item.kind else {
            continue;
        };
        let letter = match flag {
            Flag::CaseInsensitive | Flag::MultiLine | Flag::DotMatchesNewLine | Flag::SwapGreed => {
                continue;
            }
            Flag::Unicode => 'u',
            Flag::CRLF => 'R',
            Flag::IgnoreWhitespace => 'x',
        };
        return Err(format!(
            "sets the flag `{letter}`, which RE2 (Envoy's regex engine) does not have; it takes \
             the flags i, m, s and U"
        ));
    }
    Ok(())
}

fn literal(l: &Literal) -> Result<(), String> {
    let unicode_escape = matches!(
        l.kind,
        LiteralKind::HexFixed(HexLiteralKind::UnicodeShort | HexLiteralKind::UnicodeLong)
            | LiteralKind::HexBrace(HexLiteralKind::UnicodeShort | HexLiteralKind::UnicodeLong)
    );
    let escaped = unicode_escape || matches!(l.kind, LiteralKind::HexBrace(_));
    let code = u32::from(l.c);
    if escaped && code > MAX_ESCAPED {
        return Err(format!(
            "escapes the code point U+{code:04X}; Envoy's RE2 reads expressions and header values \
             as Latin-1 bytes and refuses escapes above \\x{{FF}}: write the character itself \
             (its UTF-8 bytes are matched)"
        ));
    }
    if unicode_escape {
        return Err(format!(
            "writes a code point with `\\u` or `\\U`, which RE2 (Envoy's regex engine) does \
             not read; write `\\x{{{code:X}}}`"
        ));
    }
    Ok(())
}

fn assertion(a: &Assertion) -> Result<(), String> {
    match a.kind {
        AssertionKind::StartLine
        | AssertionKind::EndLine
        | AssertionKind::StartText
        | AssertionKind::EndText
        | AssertionKind::WordBoundary
        | AssertionKind::NotWordBoundary => Ok(()),
        _ => Err(
            "uses a word-boundary form RE2 (Envoy's regex engine) does not have (`\\b{start}`, \
             `\\b{end}`, `\\<`, `\\>` or a half boundary); use `\\b`"
                .to_string(),
        ),
    }
}

fn unicode_class(c: &ClassUnicode) -> Result<(), String> {
    let name = match &c.kind {
        ClassUnicodeKind::OneLetter(letter) => letter.to_string(),
        // `\p{^Greek}`, negated: RE2 reads it too.
        ClassUnicodeKind::Named(name) => name.strip_prefix('^').unwrap_or(name).to_string(),
        ClassUnicodeKind::NamedValue { name, value, .. } => format!("{name}={value}"),
    };
    if UNICODE_NAMES.binary_search(&name.as_str()).is_ok() {
        return Ok(());
    }
    Err(format!(
        "names the Unicode class `{name}`, which RE2 (Envoy's regex engine) does not know; it \
         takes a general category abbreviation like `\\p{{Lu}}` or `\\pL`, a script name like \
         `\\p{{Greek}}`, or `\\p{{Any}}`"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(p: &str) -> String {
        check(p).unwrap_or_else(|| panic!("{p:?} should be refused"))
    }

    #[test]
    fn the_names_are_sorted_for_the_binary_search() {
        assert!(UNICODE_NAMES.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn what_re2_reads_alike_passes() {
        for p in [
            "v[0-9]+",
            ".*Chrome.*",
            "(?i)abc",
            "(?ims-U:a.b)",
            "(?U)a+",
            "(?P<n>a)(?<m>b)",
            r"\x41\x{FF}\t\n\a\f\v",
            r"[\x{80}-\x{FF}]é",
            r"\pL\PN\p{Greek}\p{^Latin}\p{Lu}\p{Any}",
            r"[\p{Han}\d[:alpha:]a-z]",
            r"^\A\b\B\z$",
            r"\d\s\w\D\S\W",
            "a{1000}",
            "a{3,}",
            "a{0,1000}",
            "(a{10}){100}",
            "((a{2}){2}){250}",
            "(a{0}){1000}",
            "(a*)*(b+){5}",
        ] {
            assert_eq!(check(p), None, "{p:?}");
        }
    }

    #[test]
    fn what_re2_refuses_or_reads_otherwise_is_named() {
        assert!(refused("(?x) a b").contains("flag `x`"));
        assert!(refused("(?u:a)").contains("flag `u`"));
        assert!(refused("(?R)^a").contains("flag `R`"));
        assert!(refused("(?i-u)a").contains("flag `u`"));
        assert!(refused(r"\u0041").contains(r"write `\x{41}`"));
        assert!(refused(r"\u{e9}").contains(r"write `\x{E9}`"));
        assert!(refused(r"[\U0001F600]").contains("U+1F600"));
        assert!(refused(r"\x{100}").contains("U+0100"));
        assert!(refused(r"[\x{80}-\x{10FFFF}]").contains("U+10FFFF"));
        assert!(refused(r"[\x{100}-\x{200}]").contains("U+0100"));
        assert!(refused(r"\p{Letter}").contains("Unicode class `Letter`"));
        assert!(refused(r"\p{greek}").contains("Unicode class `greek`"));
        assert!(refused(r"\p{sc=Greek}").contains("Unicode class `sc=Greek`"));
        assert!(refused(r"[\p{Emoji}]").contains("Unicode class `Emoji`"));
        assert!(refused(r"\p{Cn}").contains("Unicode class `Cn`"));
        assert!(refused("[a-z&&[^aeiou]]").contains("`&&`"));
        assert!(refused("[a-z--b]").contains("`--`"));
        assert!(refused("[a-z~~b]").contains("`~~`"));
        assert!(refused("[a[bc]]").contains("nests a character class"));
        assert!(refused(r"\b{start}a").contains("word-boundary"));
        assert!(refused(r"\<a\>").contains("word-boundary"));
        assert!(refused(r"a\b{end-half}").contains("word-boundary"));
        assert!(refused("a{1001}").contains("repeats 1001 times"));
        assert!(refused("a{1001,}").contains("repeats 1001 times"));
        assert!(refused("a{2,1001}").contains("repeats 1001 times"));
        assert!(refused("a{1001,1002}").contains("repeats 1001 times"));
        assert!(refused("(a{11}){100}").contains("multiply to more than 1000"));
        assert!(refused("((a{2}){2}){251}").contains("multiply"));
        assert!(refused("x(a{2,}){501}").contains("multiply"));
    }

    #[test]
    fn expressions_envoy_reads_byte_by_byte_are_told_apart() {
        for p in [
            r"\pL+",
            r"[\p{Greek}a]",
            "café",
            "[é-ü]",
            r"[\x{80}-\x{FF}]",
            r"\x{E9}",
        ] {
            assert!(reads_non_ascii(p), "{p:?}");
        }
        for p in ["v[0-9]+", r"\d\w\s.", "(?i)abc", "[^a]", "(", r"\x7F"] {
            assert!(!reads_non_ascii(p), "{p:?}");
        }
    }

    #[test]
    fn sibling_repetitions_do_not_multiply() {
        assert_eq!(check("(a{1000}b{1000}){1}"), None);
        assert_eq!(check("(a{500})(b{500}){2}"), None);
    }
}
