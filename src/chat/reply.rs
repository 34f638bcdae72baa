//! The reply text composed from what a turn found: how many items, the
//! constraints in force in words ("4 comedies under 10 for kids"), how the
//! previous answer was refined, whether the user's recent interests shaped the
//! order, and, when nothing matched, which constraint to relax.

use super::constraints::{Ask, Audience, Constraints, Note, PriceBand, PriceLimit, RelativePrice, YearRange};
use super::filter::Check;

/// What a turn found, for the reply.
#[derive(Debug, Clone)]
pub struct TurnFindings<'a> {
    pub constraints: &'a Constraints,
    pub notes: &'a [Note],
    /// Items returned.
    pub shown: usize,
    /// Items of the retrieval pool that met every constraint.
    pub matched: usize,
    /// Items retrieval found before the constraints were applied.
    pub retrieved: usize,
    /// Interests (group names) of the user/session that the shown items share.
    pub interests: Vec<String>,
    /// Whether live user/session state or request events changed the order shown
    /// (the reply says so only then).
    pub personalized: bool,
    /// Constraints that no row of the pool could be checked against, and so were not applied.
    pub unchecked: Vec<Check>,
    /// When nothing matched: the constraint whose removal would match most, and how many.
    pub relax: Option<(Check, usize)>,
    /// The title of the item the answer is like ("like Toy Story").
    pub like: Option<String>,
    /// The answer pages on from earlier ones ("more").
    pub paged: bool,
}

impl<'a> TurnFindings<'a> {
    /// Nothing found yet under `constraints`.
    pub fn new(constraints: &'a Constraints) -> TurnFindings<'a> {
        TurnFindings {
            constraints,
            notes: &[],
            shown: 0,
            matched: 0,
            retrieved: 0,
            interests: Vec::new(),
            personalized: false,
            unchecked: Vec::new(),
            relax: None,
            like: None,
            paged: false,
        }
    }
}

/// Genres that read badly in the plural ("horrors", "actions"): "horror picks".
const UNCOUNTABLE: &[&str] = &[
    "action",
    "adventure",
    "animation",
    "biography",
    "children",
    "crime",
    "family",
    "fantasy",
    "history",
    "horror",
    "music",
    "news",
    "romance",
    "sport",
    "war",
    "noir",
];

/// "comedies", "thrillers", "horror picks", "Sci-Fi picks" (or the singular for one).
fn group_phrase(name: &str, count: usize) -> String {
    let lower = name.to_lowercase();
    let single_word = lower.chars().all(char::is_alphabetic) && name.chars().skip(1).any(char::is_lowercase);
    if !single_word && name.ends_with('s') {
        return name.to_owned();
    }
    if !single_word || UNCOUNTABLE.contains(&lower.as_str()) {
        let display = if single_word { lower } else { name.to_owned() };
        return format!("{display} {}", if count == 1 { "pick" } else { "picks" });
    }
    if count == 1 || lower.ends_with('s') {
        return lower;
    }
    let consonant_y =
        lower.ends_with('y') && !lower.ends_with("ay") && !lower.ends_with("ey") && !lower.ends_with("oy");
    if consonant_y {
        format!("{}ies", &lower[..lower.len() - 1])
    } else if lower.ends_with('x') || lower.ends_with("ch") || lower.ends_with("sh") {
        format!("{lower}es")
    } else {
        format!("{lower}s")
    }
}

/// "10", "12.50".
pub fn format_amount(amount: f64) -> String {
    if amount.fract() == 0.0 {
        format!("{amount:.0}")
    } else {
        format!("{amount:.2}")
    }
}

fn ceiling_words(limit: PriceLimit) -> String {
    let word = if limit.inclusive { "up to" } else { "under" };
    format!("{word} {}", format_amount(limit.amount))
}

fn floor_words(limit: PriceLimit) -> String {
    let word = if limit.inclusive { "from" } else { "over" };
    format!("{word} {}", format_amount(limit.amount))
}

/// The price bounds in words: "under 10", "between 10 and 20", "over 5".
pub fn price_words(constraints: &Constraints) -> Option<String> {
    match (constraints.min_price, constraints.max_price) {
        (Some(floor), Some(ceiling)) if floor.inclusive && ceiling.inclusive => Some(format!(
            "between {} and {}",
            format_amount(floor.amount),
            format_amount(ceiling.amount)
        )),
        (Some(floor), Some(ceiling)) => Some(format!("{} and {}", floor_words(floor), ceiling_words(ceiling))),
        (Some(floor), None) => Some(floor_words(floor)),
        (None, Some(ceiling)) => Some(ceiling_words(ceiling)),
        (None, None) => None,
    }
}

fn list(names: &[String], conjunction: &str) -> String {
    match names {
        [] => String::new(),
        [only] => only.clone(),
        [init @ .., last] => format!("{} {conjunction} {last}", init.join(", ")),
    }
}

/// The years in words: "from 1990 to 1999", "from 2014", "up to 1979".
fn year_words(years: YearRange) -> String {
    match (years.from, years.to) {
        (Some(from), Some(to)) if from == to => format!("from {from}"),
        (Some(from), Some(to)) => format!("from {from} to {to}"),
        (Some(from), None) => format!("from {from} on"),
        (None, Some(to)) => format!("up to {to}"),
        (None, None) => String::new(),
    }
}

/// "4 comedies like Toy Story matching "love" under 10 for kids in French, not
/// Horror": the count, the groups, and every constraint in force, in words.
pub fn describe(constraints: &Constraints, count: usize, unchecked: &[Check], like: Option<&str>) -> String {
    let what = match constraints.groups.as_slice() {
        [] if count == 1 => "item".to_owned(),
        [] => "items".to_owned(),
        groups => {
            let phrases: Vec<String> = groups.iter().map(|group| group_phrase(group, count)).collect();
            list(&phrases, "or")
        }
    };
    let mut text = if count == 0 { what } else { format!("{count} {what}") };
    if let Some(title) = like {
        text.push_str(&format!(" like {title}"));
    }
    if !constraints.query.is_empty() {
        text.push_str(&format!(" matching \"{}\"", constraints.query.join(" ")));
    }
    if !constraints.tags.is_empty() {
        let quoted: Vec<String> = constraints.tags.iter().map(|tag| format!("\"{tag}\"")).collect();
        text.push_str(&format!(" tagged {}", list(&quoted, "or")));
    }
    if let Some(price) = price_words(constraints) {
        text.push(' ');
        text.push_str(&price);
    }
    if let (Some(audience), false) = (constraints.audience, unchecked.contains(&Check::Audience)) {
        text.push_str(match audience {
            Audience::Kids => " for kids",
            Audience::Adults => " for adults",
        });
    }
    if let (Some(language), false) = (&constraints.language, unchecked.contains(&Check::Language)) {
        text.push_str(&format!(" in {}", language.name));
    }
    if let Some(years) = constraints.years {
        text.push(' ');
        text.push_str(&year_words(years));
    }
    if constraints.available {
        text.push_str(" available now");
    }
    let excluded = excluded_names(constraints);
    if !excluded.is_empty() {
        text.push_str(&format!(", not {}", list(&excluded, "or")));
    }
    text
}

/// The groups and tags ruled out, groups first.
fn excluded_names(constraints: &Constraints) -> Vec<String> {
    constraints
        .excluded_groups
        .iter()
        .chain(&constraints.excluded_tags)
        .cloned()
        .collect()
}

/// How to relax one constraint, in words.
fn relax_words(check: Check, constraints: &Constraints) -> String {
    match check {
        Check::Price => match price_words(constraints) {
            Some(price) => format!("the price limit ({price})"),
            None => "the price limit".to_owned(),
        },
        Check::Groups => format!("the category ({})", list(&constraints.groups, "or")),
        Check::Tags => format!("the tags ({})", list(&constraints.tags, "or")),
        Check::Language => match &constraints.language {
            Some(language) => format!("the language ({})", language.name),
            None => "the language".to_owned(),
        },
        Check::Audience => match constraints.audience {
            Some(Audience::Kids) => "\"for kids\"".to_owned(),
            Some(Audience::Adults) => "\"for adults\"".to_owned(),
            None => "the audience".to_owned(),
        },
        Check::Excluded => format!("the exclusion (not {})", list(&excluded_names(constraints), "or")),
        Check::Years => match constraints.years {
            Some(years) => format!("the years ({})", year_words(years)),
            None => "the years".to_owned(),
        },
        Check::Availability => "\"available now\"".to_owned(),
    }
}

pub fn note_words(note: &Note, constraints: &Constraints) -> String {
    let direction = |relative: &RelativePrice| match relative {
        RelativePrice::Cheaper => "cheaper",
        RelativePrice::Pricier => "more expensive",
    };
    match note {
        Note::RelativeTo(relative, median) => format!(
            "Going {} than my last suggestions (their median price was {}): now {}.",
            direction(relative),
            format_amount(*median),
            price_words(constraints).unwrap_or_default()
        ),
        Note::RelativeToBound(relative) => format!(
            "Going {}: now {}.",
            direction(relative),
            price_words(constraints).unwrap_or_default()
        ),
        Note::NothingToCompare(relative) => format!(
            "I had no earlier prices to go {} than, so the price is as before.",
            direction(relative)
        ),
        Note::Band(band) => {
            let word = match band {
                PriceBand::Cheapest => "The cheapest",
                PriceBand::Cheap => "Cheap",
                PriceBand::Moderate => "Not too expensive",
                PriceBand::Premium => "Premium",
            };
            format!(
                "{word} here means {}.",
                price_words(constraints).unwrap_or_else(|| "any price".to_owned())
            )
        }
        Note::TitleNotFound(title) => {
            format!("I could not find \"{title}\" in the catalog, so I searched for those words.")
        }
        Note::NothingShownYet => "I have not shown you anything yet to refer to.".to_owned(),
    }
}

/// What a turn says about one item ("is it available?", "how much is it?").
#[derive(Debug, Clone)]
pub struct ItemFacts {
    pub title: String,
    /// `Some(true)` available, `Some(false)` not, `None` unknown.
    pub available: Option<bool>,
    /// As shown to the user ("12.99 USD"), empty without a price.
    pub price: String,
}

/// The reply to a question about one item (or to a reference alone: both facts).
pub fn answer_about(item: &ItemFacts, ask: Option<Ask>) -> String {
    let availability = match item.available {
        Some(true) => format!("{} is available.", item.title),
        Some(false) => format!("{} is not available right now.", item.title),
        None => format!("I don't know whether {} is available.", item.title),
    };
    let price = match item.price.as_str() {
        "" => format!("I have no price for {}.", item.title),
        price => format!("{} costs {price}.", item.title),
    };
    match ask {
        Some(Ask::Availability) => availability,
        Some(Ask::Price) => price,
        None => format!("{price} {availability}"),
    }
}

/// The reply of a turn.
pub fn compose(outcome: &TurnFindings) -> String {
    let constraints = outcome.constraints;
    let mut sentences: Vec<String> = outcome.notes.iter().map(|note| note_words(note, constraints)).collect();
    if outcome.shown > 0 {
        let verb = if outcome.shown == 1 { "is" } else { "are" };
        let mut described = describe(constraints, outcome.shown, &outcome.unchecked, outcome.like.as_deref());
        if outcome.paged {
            // "4 comedies" → "4 more comedies".
            let count = outcome.shown.to_string();
            described = described.replacen(&count, &format!("{count} more"), 1);
        }
        let mut found = format!("Here {verb} {described}");
        if outcome.matched > outcome.shown {
            found.push_str(&format!(" (the best of {} that match)", outcome.matched));
        }
        found.push('.');
        sentences.push(found);
        match (outcome.personalized, outcome.interests.is_empty()) {
            (true, false) => sentences.push(format!(
                "I put first what fits your recent interest in {}.",
                list(&outcome.interests, "and")
            )),
            (true, true) => sentences.push("The order takes your recent activity into account.".to_owned()),
            (false, _) => {}
        }
    } else if outcome.retrieved == 0 && constraints.query.is_empty() && !constraints.is_filtering() {
        sentences.push(
            "Tell me what you are looking for: a title, a category, a price (\"under 20\"), who it is for \
             (\"for kids\") or a language."
                .to_owned(),
        );
    } else if outcome.retrieved == 0 {
        sentences.push(format!(
            "I found no {}. Try other words.",
            describe(constraints, 0, &outcome.unchecked, outcome.like.as_deref())
        ));
    } else {
        let mut nothing = format!(
            "I found no {}.",
            describe(constraints, 0, &outcome.unchecked, outcome.like.as_deref())
        );
        if let Some((check, count)) = outcome.relax {
            let items = if count == 1 { "item" } else { "items" };
            nothing.push_str(&format!(
                " Relax {} and {count} {items} would match.",
                relax_words(check, constraints)
            ));
        }
        sentences.push(nothing);
    }
    for check in &outcome.unchecked {
        match check {
            Check::Language => sentences.push("The catalog lists no languages here, so I could not check that.".into()),
            Check::Audience => {
                sentences.push("The catalog gives no ages here, so I could not check who it suits.".into())
            }
            _ => {}
        }
    }
    sentences.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::constraints::fixtures::comedies_under_10;
    use crate::chat::constraints::Language;

    #[test]
    fn group_phrases() {
        assert_eq!(group_phrase("Comedy", 4), "comedies");
        assert_eq!(group_phrase("Comedy", 1), "comedy");
        assert_eq!(group_phrase("Thriller", 2), "thrillers");
        assert_eq!(group_phrase("Horror", 2), "horror picks");
        assert_eq!(group_phrase("Sci-Fi", 2), "Sci-Fi picks");
        assert_eq!(group_phrase("IMAX", 2), "IMAX picks");
        assert_eq!(group_phrase("Walking Tours", 3), "Walking Tours");
        assert_eq!(group_phrase("Tours", 3), "tours");
    }

    #[test]
    fn describes_every_constraint() {
        let mut constraints = comedies_under_10();
        constraints.query = vec!["love".into()];
        constraints.audience = Some(Audience::Kids);
        constraints.language = Some(Language {
            code: "fr".into(),
            name: "French".into(),
        });
        constraints.tags = vec!["dark comedy".into()];
        assert_eq!(
            describe(&constraints, 4, &[], None),
            "4 comedies matching \"love\" tagged \"dark comedy\" under 10 for kids in French"
        );
        assert_eq!(
            describe(&constraints, 4, &[Check::Language], None),
            "4 comedies matching \"love\" tagged \"dark comedy\" under 10 for kids"
        );
        constraints.min_price = Some(PriceLimit {
            amount: 2.5,
            inclusive: true,
        });
        assert_eq!(price_words(&constraints).unwrap(), "from 2.50 and under 10");
    }

    #[test]
    fn a_found_reply_says_how_many_and_why() {
        let constraints = comedies_under_10();
        let notes = [Note::RelativeTo(RelativePrice::Cheaper, 6.0)];
        let reply = compose(&TurnFindings {
            notes: &notes,
            shown: 4,
            matched: 30,
            retrieved: 500,
            interests: vec!["Comedy".into()],
            personalized: true,
            ..TurnFindings::new(&constraints)
        });
        assert_eq!(
            reply,
            "Going cheaper than my last suggestions (their median price was 6): now under 10. \
             Here are 4 comedies under 10 (the best of 30 that match). \
             I put first what fits your recent interest in Comedy."
        );
    }

    #[test]
    fn an_empty_reply_says_what_to_relax() {
        let constraints = comedies_under_10();
        let reply = compose(&TurnFindings {
            retrieved: 500,
            relax: Some((Check::Price, 12)),
            ..TurnFindings::new(&constraints)
        });
        assert_eq!(
            reply,
            "I found no comedies under 10. Relax the price limit (under 10) and 12 items would match."
        );
        let nothing = Constraints::default();
        let reply = compose(&TurnFindings::new(&nothing));
        assert!(reply.starts_with("Tell me what you are looking for"), "{reply}");
        let query = Constraints {
            query: vec!["zzzz".into()],
            ..Constraints::default()
        };
        let reply = compose(&TurnFindings::new(&query));
        assert_eq!(reply, "I found no items matching \"zzzz\". Try other words.");
    }
}
