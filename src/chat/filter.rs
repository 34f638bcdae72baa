//! Which catalog rows satisfy a conversation's constraints, one check per kind of
//! constraint so that an empty answer can say which one to relax.
//!
//! Fields read from a row: `price` (number or numeric string); groups from
//! `groups`, `genres`, `group`, `category`, `categories`; tags from `tags`,
//! `promo_tags`, `tags_from_models`; languages from `language`, `languages`,
//! `attraction_live_guide_languages` (codes or names); ages from
//! `attraction_age_range`, `age_range`, `audience` ("6-12", "18+", "all ages", "kids",
//! "women", ...), `min_age`,
//! `max_age`. A row that does not state what a constraint asks about fails it,
//! except that a language or audience constraint nobody in the pool can be checked
//! against is not applied at all (see [`Applicable`]).

use serde_json::{Map, Value};

use super::constraints::{language_of, Audience, Constraints};
use super::dictionary::{words_of, CHILDREN_GROUP_WORDS};
use crate::domain::live_state::availability;

/// A kind of constraint a row can fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Check {
    Price,
    Groups,
    Tags,
    Language,
    Audience,
    /// A ruled-out group or tag.
    Excluded,
    Years,
    Availability,
}

const GROUP_FIELDS: &[&str] = &["groups", "genres", "group", "category", "categories"];
const TAG_FIELDS: &[&str] = &["tags", "promo_tags", "tags_from_models"];
const LANGUAGE_FIELDS: &[&str] = &["language", "languages", "attraction_live_guide_languages"];
const AGE_FIELDS: &[&str] = &["attraction_age_range", "age_range", "audience"];

/// Oldest age still "for kids".
const CHILD_AGE: f64 = 12.0;
/// Youngest adult.
const ADULT_AGE: f64 = 18.0;

/// The strings of a field that holds a string or an array of strings.
fn strings<'a>(row: &'a Map<String, Value>, fields: &[&str]) -> Vec<&'a str> {
    let mut values = Vec::new();
    for field in fields {
        match row.get(*field) {
            Some(Value::String(value)) => values.push(value.as_str()),
            Some(Value::Array(items)) => values.extend(items.iter().filter_map(Value::as_str)),
            _ => {}
        }
    }
    values
}

/// A row's numeric price.
pub fn price_of(row: &Map<String, Value>) -> Option<f64> {
    let price: Option<f64> = match row.get("price")? {
        Value::Number(number) => number.as_f64(),
        Value::String(text) => text.trim().trim_start_matches(['$', '€', '£']).trim().parse().ok(),
        _ => None,
    };
    price.filter(|price| price.is_finite() && *price >= 0.0)
}

/// A row's year: a `year` or `release_year` field (number or text), the year of a
/// `release_date`, else a "(1995)" at the end of its title or name.
pub fn year_of(row: &Map<String, Value>) -> Option<i32> {
    let plausible = |year: i64| (1000..=9999).contains(&year).then_some(year as i32);
    for field in ["year", "release_year"] {
        match row.get(field) {
            Some(Value::Number(number)) => return number.as_i64().and_then(plausible),
            Some(Value::String(text)) => return text.trim().parse().ok().and_then(plausible),
            _ => {}
        }
    }
    if let Some(date) = row.get("release_date").and_then(Value::as_str) {
        return date.get(..4)?.parse().ok().and_then(plausible);
    }
    let title = ["title", "name"].iter().find_map(|field| row.get(*field)?.as_str())?;
    let inner = title.trim_end().strip_suffix(')')?;
    let year = inner.get(inner.len().checked_sub(5)?..)?.strip_prefix('(')?;
    year.parse().ok().and_then(plausible)
}

/// A row's groups (as stored).
pub fn groups_of(row: &Map<String, Value>) -> Vec<&str> {
    strings(row, GROUP_FIELDS)
}

/// What a row says about the ages it suits.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Ages {
    min: Option<f64>,
    max: Option<f64>,
    /// "all ages", "family", "kids": suits children whatever the numbers.
    for_children: bool,
    stated: bool,
}

fn ages_of(row: &Map<String, Value>) -> Ages {
    let mut ages = Ages::default();
    for text in strings(row, AGE_FIELDS) {
        ages.stated = true;
        let lower = text.to_lowercase();
        let words = words_of(&lower);
        if lower.contains("all ages") || words.iter().any(|w| CHILDREN_GROUP_WORDS.contains(&w.as_str())) {
            ages.for_children = true;
        }
        if words.iter().any(|w| w == "adult" || w == "adults") {
            ages.min = Some(ages.min.map_or(ADULT_AGE, |min| min.max(ADULT_AGE)));
        }
        let numbers: Vec<f64> = lower
            .split(|c: char| !c.is_ascii_digit() && c != '.')
            .filter_map(|n| n.parse().ok())
            .collect();
        match numbers.as_slice() {
            [only] if lower.contains('+') || lower.contains("over") || lower.contains("from") => ages.min = Some(*only),
            [only] if lower.contains("under") || lower.contains("up to") => ages.max = Some(*only),
            [only] => ages.min = Some(*only),
            [low, high, ..] => {
                ages.min = Some(low.min(*high));
                ages.max = Some(low.max(*high));
            }
            [] => {}
        }
    }
    for (field, slot) in [("min_age", &mut ages.min), ("max_age", &mut ages.max)] {
        if let Some(age) = row.get(field).and_then(Value::as_f64) {
            *slot = Some(age);
            ages.stated = true;
        }
    }
    ages
}

fn in_children_group(row: &Map<String, Value>, children_groups: &[String]) -> bool {
    groups_of(row)
        .iter()
        .any(|group| children_groups.iter().any(|child| child.eq_ignore_ascii_case(group)))
}

/// Which language and audience constraints can be checked against a retrieval pool
/// at all: a catalog that never states languages cannot be filtered by one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Applicable {
    pub language: bool,
    pub audience: bool,
    /// Some row states whether it is available.
    pub availability: bool,
}

impl Applicable {
    /// Looks at the pool: a language applies when some row lists languages; an
    /// audience when some row states ages or the catalog has a children group.
    pub fn of<'a>(rows: impl IntoIterator<Item = &'a Map<String, Value>>, children_groups: &[String]) -> Applicable {
        let mut applicable = Applicable {
            language: false,
            audience: !children_groups.is_empty(),
            availability: false,
        };
        for row in rows {
            applicable.language |= !strings(row, LANGUAGE_FIELDS).is_empty();
            applicable.audience |= ages_of(row).stated;
            applicable.availability |= availability(row).is_some();
            if applicable.language && applicable.audience && applicable.availability {
                break;
            }
        }
        applicable
    }
}

/// The checks `row` fails; empty when it satisfies every applicable constraint.
pub fn failed_checks(
    row: &Map<String, Value>,
    constraints: &Constraints,
    applicable: Applicable,
    children_groups: &[String],
) -> Vec<Check> {
    let mut failed = Vec::new();
    if constraints.min_price.is_some() || constraints.max_price.is_some() {
        let fits = price_of(row).is_some_and(|price| constraints.price_allows(price));
        if !fits {
            failed.push(Check::Price);
        }
    }
    if !constraints.groups.is_empty() {
        let groups = groups_of(row);
        let fits = constraints
            .groups
            .iter()
            .any(|wanted| groups.iter().any(|group| group.eq_ignore_ascii_case(wanted)));
        if !fits {
            failed.push(Check::Groups);
        }
    }
    if !constraints.tags.is_empty() {
        let tags = strings(row, TAG_FIELDS);
        let fits = constraints
            .tags
            .iter()
            .any(|wanted| tags.iter().any(|tag| tag.eq_ignore_ascii_case(wanted)));
        if !fits {
            failed.push(Check::Tags);
        }
    }
    let excluded_group = !constraints.excluded_groups.is_empty() && {
        let groups = groups_of(row);
        constraints
            .excluded_groups
            .iter()
            .any(|unwanted| groups.iter().any(|group| group.eq_ignore_ascii_case(unwanted)))
    };
    let excluded_tag = !constraints.excluded_tags.is_empty() && {
        let tags = strings(row, TAG_FIELDS);
        constraints
            .excluded_tags
            .iter()
            .any(|unwanted| tags.iter().any(|tag| tag.eq_ignore_ascii_case(unwanted)))
    };
    if excluded_group || excluded_tag {
        failed.push(Check::Excluded);
    }
    if let Some(years) = constraints.years {
        if !year_of(row).is_some_and(|year| years.allows(year)) {
            failed.push(Check::Years);
        }
    }
    if constraints.available && applicable.availability && availability(row) != Some(true) {
        failed.push(Check::Availability);
    }
    if let (Some(language), true) = (&constraints.language, applicable.language) {
        let fits = strings(row, LANGUAGE_FIELDS)
            .iter()
            .any(|value| language_of(value).is_some_and(|found| found.code == language.code));
        if !fits {
            failed.push(Check::Language);
        }
    }
    if let (Some(audience), true) = (constraints.audience, applicable.audience) {
        if !suits(row, audience, children_groups) {
            failed.push(Check::Audience);
        }
    }
    failed
}

/// Whether a row suits the audience: by its stated ages, else (for kids) by being
/// in one of the catalog's children groups; adults are refused only what is
/// explicitly for children.
fn suits(row: &Map<String, Value>, audience: Audience, children_groups: &[String]) -> bool {
    let ages = ages_of(row);
    let children_group = in_children_group(row, children_groups);
    match audience {
        Audience::Kids if ages.stated => {
            ages.for_children
                || match (ages.min, ages.max) {
                    (Some(min), _) => min <= CHILD_AGE,
                    (None, Some(_)) => true,
                    (None, None) => false,
                }
        }
        Audience::Kids => children_group,
        Audience::Adults => {
            let children_only = ages.max.is_some_and(|max| max < ADULT_AGE) || (!ages.stated && children_group);
            !children_only
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::constraints::fixtures::comedies_under_10;
    use crate::chat::constraints::Language;
    use serde_json::json;

    fn row(value: Value) -> Map<String, Value> {
        value.as_object().expect("an object").clone()
    }

    fn children() -> Vec<String> {
        vec!["Children".to_owned()]
    }

    const ALL: Applicable = Applicable {
        language: true,
        audience: true,
        availability: true,
    };

    #[test]
    fn price_and_groups() {
        let constraints = comedies_under_10();
        let ok = row(json!({"price": 9.5, "groups": ["Comedy", "Drama"]}));
        assert!(failed_checks(&ok, &constraints, ALL, &[]).is_empty());
        let pricey = row(json!({"price": "10", "genres": "comedy"}));
        assert_eq!(failed_checks(&pricey, &constraints, ALL, &[]), vec![Check::Price]);
        let unpriced = row(json!({"category": "Drama"}));
        assert_eq!(
            failed_checks(&unpriced, &constraints, ALL, &[]),
            vec![Check::Price, Check::Groups]
        );
        assert_eq!(price_of(&row(json!({"price": "$12.50"}))), Some(12.5));
        assert_eq!(price_of(&row(json!({"price": -1}))), None);
    }

    #[test]
    fn tags_and_languages() {
        let constraints = Constraints {
            tags: vec!["Wine tasting".into()],
            language: Some(Language {
                code: "fr".into(),
                name: "French".into(),
            }),
            ..Constraints::default()
        };
        let tour = row(json!({"tags": ["wine tasting"], "attraction_live_guide_languages": ["en", "fr"]}));
        assert!(failed_checks(&tour, &constraints, ALL, &[]).is_empty());
        let english = row(json!({"promo_tags": "wine tasting", "language": "English"}));
        assert_eq!(failed_checks(&english, &constraints, ALL, &[]), vec![Check::Language]);
        let unstated = row(json!({"tags": ["wine tasting"]}));
        let no_languages = Applicable::of([&unstated], &[]);
        assert!(!no_languages.language);
        assert!(failed_checks(&unstated, &constraints, no_languages, &[]).is_empty());
        assert!(Applicable::of([&unstated, &english], &[]).language);
    }

    #[test]
    fn exclusions_years_and_availability() {
        let constraints = Constraints {
            excluded_groups: vec!["Horror".into()],
            years: Some(crate::chat::constraints::YearRange {
                from: Some(1990),
                to: Some(1999),
            }),
            available: true,
            ..Constraints::default()
        };
        let check = |value: Value| failed_checks(&row(value), &constraints, ALL, &[]);
        assert!(
            check(json!({"name": "Toy Story (1995)", "groups": ["Comedy"], "availability": "in_stock"})).is_empty()
        );
        assert_eq!(
            check(json!({"name": "Scream (1996)", "groups": ["horror"], "availability": true})),
            vec![Check::Excluded]
        );
        assert_eq!(
            check(json!({"title": "Heat", "year": "1984", "availability": 0})),
            vec![Check::Years, Check::Availability]
        );
        assert_eq!(year_of(&row(json!({"release_date": "2001-09-11"}))), Some(2001));
        assert_eq!(year_of(&row(json!({"name": "Babylon 5"}))), None);
    }

    #[test]
    fn kids_by_ages_or_children_group() {
        let kids = Constraints {
            audience: Some(Audience::Kids),
            ..Constraints::default()
        };
        let check = |value: Value| failed_checks(&row(value), &kids, ALL, &children()).is_empty();
        assert!(check(json!({"attraction_age_range": "6-12"})));
        assert!(check(json!({"age_range": "All ages"})));
        assert!(check(json!({"min_age": 3})));
        assert!(!check(json!({"attraction_age_range": "18+"})));
        assert!(!check(json!({"age_range": "adults only"})));
        assert!(check(json!({"groups": ["Children", "Comedy"]})));
        assert!(!check(json!({"groups": ["Comedy"]})));
        assert!(Applicable::of([], &children()).audience);
        assert!(!Applicable::of([], &[]).audience);
    }

    #[test]
    fn adults_lose_only_what_is_for_children() {
        let adults = Constraints {
            audience: Some(Audience::Adults),
            ..Constraints::default()
        };
        let check = |value: Value| failed_checks(&row(value), &adults, ALL, &children()).is_empty();
        assert!(check(json!({"attraction_age_range": "18+"})));
        assert!(check(json!({"groups": ["Comedy"]})));
        assert!(!check(json!({"groups": ["Children"]})));
        assert!(!check(json!({"age_range": "3-10"})));
        assert!(check(json!({"age_range": "8-99"})));
    }
}
