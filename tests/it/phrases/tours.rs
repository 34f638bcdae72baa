//! A non-movie catalog: 120 city tours in table `tours`, generated from their
//! number so that every run loads the same rows, and the cases asked of it
//! (groups, tags, guide languages, age ranges, prices in euros).

use serde_json::{json, Value};

use super::case::{ask, cases, script, Case, Question::*, Turn};
use super::catalog::{Catalog, Item};
use super::want::{previous, same, want, FIRST, LAST, SECOND};

const TOURS: usize = 120;

const GROUPS: [&str; 5] = [
    "Walking Tours",
    "Food Tours",
    "Boat Tours",
    "Bike Tours",
    "Museum Tours",
];
/// What a tour of each group is called in its name.
const KINDS: [&str; 5] = ["Walking Tour", "Food Tour", "Boat Tour", "Bike Tour", "Museum Tour"];
/// Where the tours go (no word here is also a price, year or language word).
const PLACES: [&str; 8] = [
    "Historic Centre",
    "Harbour",
    "Riverside",
    "Castle Hill",
    "Market Square",
    "Cathedral",
    "Canal",
    "Vineyard",
];
/// Live guide languages.
const LANGUAGES: [&[&str]; 7] = [
    &["en"],
    &["en", "fr"],
    &["en", "de"],
    &["es"],
    &["en", "es", "it"],
    &["fr", "de"],
    &["it", "en"],
];

/// An age range and whom it suits.
struct AgeRange {
    text: &'static str,
    /// Open to some age of 12 or less, or to all ages.
    for_kids: bool,
    /// Not for children only.
    for_adults: bool,
}

const AGE_RANGES: [AgeRange; 4] = [
    AgeRange {
        text: "All ages",
        for_kids: true,
        for_adults: true,
    },
    AgeRange {
        text: "6-12",
        for_kids: true,
        for_adults: false,
    },
    AgeRange {
        text: "18+",
        for_kids: false,
        for_adults: true,
    },
    AgeRange {
        text: "12+",
        for_kids: true,
        for_adults: true,
    },
];

/// Tour `n` (0-based): its row and what the checks know about it.
fn tour(n: usize) -> (Value, Item) {
    let group = n % 5;
    let mut groups = vec![GROUPS[group].to_owned()];
    if n % 4 == 3 {
        groups.push(GROUPS[(group + 1 + (n / 5) % 4) % 5].to_owned());
    }
    let place = PLACES[(n / 5) % PLACES.len()];
    let name = format!("{place} {} {}", KINDS[group], n + 1);
    let languages = LANGUAGES[(n / 2) % LANGUAGES.len()];
    let ages = &AGE_RANGES[(n / 3) % AGE_RANGES.len()];
    let mut tags = Vec::new();
    if matches!(GROUPS[group], "Food Tours" | "Boat Tours") && n % 3 != 1 {
        tags.push("wine tasting");
    }
    if n % 4 == 1 {
        tags.push("sunset");
    }
    let families = ages.text == "All ages" || ages.text == "6-12";
    if families && n.is_multiple_of(2) {
        tags.push("family friendly");
    }
    if n % 6 == 5 {
        tags.push("small group");
    }
    // 5.00 to 199.99, spread over the numbers.
    let price = 5.0 + ((n * 7919) % 19_500) as f64 / 100.0;
    let available = n % 7 != 3;
    let row = json!({
        "id": format!("tour-{}", n + 1),
        "_table": "tours",
        "name": name,
        "groups": groups,
        "tags": tags,
        "price": price,
        "currency": "EUR",
        "attraction_live_guide_languages": languages,
        "attraction_age_range": ages.text,
        "availability": available,
        "description": format!("A {} through the {place}, with a live guide.", KINDS[group].to_lowercase()),
    });
    let item = Item {
        id: format!("tour-{}", n + 1),
        title: name,
        groups,
        tags: tags.iter().map(|tag| tag.to_string()).collect(),
        price,
        currency: Some("EUR"),
        status: if available { "available" } else { "unavailable" },
        year: None,
        languages: languages.to_vec(),
        for_kids: ages.for_kids,
        for_adults: ages.for_adults,
    };
    (row, item)
}

/// The tour rows and the catalog the checks read.
pub fn tours() -> (Vec<Value>, Catalog) {
    let (rows, items): (Vec<Value>, Vec<Item>) = (0..TOURS).map(tour).unzip();
    (rows, Catalog::new("tours", items))
}

pub fn tour_cases() -> Vec<Case> {
    let single = [
        groups_and_tags(),
        languages_and_ages(),
        prices(),
        negations(),
        open_asks(),
    ];
    cases(single.concat(), scripts())
}

#[rustfmt::skip] // a table: one case a line
fn groups_and_tags() -> Vec<Turn> {
    vec![
        ask("walking tours", want().groups(&["Walking Tours"]).no_query()),
        ask("food tours", want().groups(&["Food Tours"]).no_query()),
        ask("a boat tour", want().groups(&["Boat Tours"])),
        ask("bike tours", want().groups(&["Bike Tours"])),
        ask("museum tours", want().groups(&["Museum Tours"])),
        ask("walking or bike tours", want().groups(&["Walking Tours", "Bike Tours"])),
        ask("tours with wine tasting", want().tags(&["wine tasting"])),
        ask("wine tasting", want().tags(&["wine tasting"]).no_query()),
        ask("sunset boat tours", want().groups(&["Boat Tours"]).tags(&["sunset"])),
        ask("family friendly tours", want().tags(&["family friendly"])),
        ask("small group tours", want().tags(&["small group"])),
        ask(
            "boat tours with wine tasting under 100 euros",
            want().groups(&["Boat Tours"]).tags(&["wine tasting"]).under(100.0),
        ),
        ask("something like Historic Centre Walking Tour 1", want().like("Historic Centre Walking Tour 1").no_query()),
        ask("tours similar to Canal Food Tour 32", want().like("Canal Food Tour 32")),
    ]
}

#[rustfmt::skip] // a table: one case a line
fn languages_and_ages() -> Vec<Turn> {
    vec![
        ask("tours in French", want().language("fr")),
        ask("with a Spanish guide", want().language("es").no_query()),
        ask("walking tours in German", want().groups(&["Walking Tours"]).language("de")),
        ask("a food tour in Italian", want().groups(&["Food Tours"]).language("it")),
        ask("tours in English", want().language("en")),
        ask("museum tours with an English guide", want().groups(&["Museum Tours"]).language("en")),
        ask("a boat tour with a French guide", want().groups(&["Boat Tours"]).language("fr")),
        ask("for kids", want().kids().no_query()),
        ask("tours for kids", want().kids()),
        ask("something for children", want().kids().no_query()),
        ask("18+", want().adults().no_query()),
        ask("tours for adults", want().adults()),
        ask("adults only museum tours", want().groups(&["Museum Tours"]).adults()),
        // Without a currency, "under 10" after "kids" is an age.
        ask("tours for kids under 10", want().kids().absent(&["max_price"])),
        ask("boat tours for kids under 30 euros", want().groups(&["Boat Tours"]).kids().under(30.0)),
        ask(
            "walking tours in French for kids under 50 euros",
            want().groups(&["Walking Tours"]).language("fr").kids().under(50.0),
        ),
        ask("bike tours with a German guide for adults", want().groups(&["Bike Tours"]).language("de").adults()),
        ask("cheap food tours in Spanish", want().groups(&["Food Tours"]).language("es").cheap()),
    ]
}

#[rustfmt::skip] // a table: one case a line
fn prices() -> Vec<Turn> {
    vec![
        ask("under 50 euros", want().under(50.0).no_query()),
        ask("under €30", want().under(30.0).no_query()),
        ask("below 40 EUR", want().under(40.0).no_query()),
        ask("less than 25 euros", want().under(25.0).no_query()),
        ask("at most €60", want().at_most(60.0).no_query()),
        ask("up to 80 euros", want().at_most(80.0).no_query()),
        ask("no more than €35", want().at_most(35.0).no_query()),
        ask("between 20 and 60 euros", want().between(20.0, 60.0).no_query()),
        ask("from €10 to €40", want().between(10.0, 40.0).no_query()),
        ask("€20-€50", want().between(20.0, 50.0).no_query()),
        ask("at least 100 euros", want().at_least(100.0).no_query()),
        ask("over 150 euros", want().over(150.0).no_query()),
        ask("more than 120 euros", want().over(120.0).no_query()),
        ask("cheap tours", want().cheap()),
        ask("cheapest walking tours", want().groups(&["Walking Tours"]).cheapest()),
        ask("affordable food tours", want().groups(&["Food Tours"]).cheap()),
        ask("budget-friendly bike tours", want().groups(&["Bike Tours"]).cheap()),
        ask("not too expensive", want().mid_priced().no_query()),
        ask("mid-range museum tours", want().groups(&["Museum Tours"]).mid_priced()),
        ask("premium boat tours", want().groups(&["Boat Tours"]).premium()),
        ask("luxury", want().premium().no_query()),
        ask("expensive tours", want().premium()),
    ]
}

#[rustfmt::skip] // a table: one case a line
fn negations() -> Vec<Turn> {
    vec![
        ask("no boat tours", want().not(&["Boat Tours"])),
        ask("anything but walking tours", want().not(&["Walking Tours"])),
        ask("I don't want museum tours", want().not(&["Museum Tours"])),
        ask("without bike tours", want().not(&["Bike Tours"])),
        ask("not food tours", want().not(&["Food Tours"])),
        ask("skip the museum tours", want().not(&["Museum Tours"])),
        ask("food tours without wine tasting", want().groups(&["Food Tours"]).not_tags(&["wine tasting"])),
    ]
}

#[rustfmt::skip] // a table: one case a line
fn open_asks() -> Vec<Turn> {
    vec![
        ask("what do you have?", want().no_constraints()),
        ask("hello", want().no_constraints()),
        ask("recommend me something", want().no_constraints()),
    ]
}

#[rustfmt::skip] // a table: one case a line
fn scripts() -> Vec<Case> {
    vec![
        script("refine, then start over", [
            ask("walking tours under 100 euros", want().groups(&["Walking Tours"]).under(100.0)),
            ask("cheaper", previous().cheaper()),
            ask("in French", previous().language("fr")),
            ask("for kids", previous().kids()),
            ask("start over", want().no_constraints()),
        ]),
        script("is the second available", [
            ask("boat tours", want().groups(&["Boat Tours"])),
            ask("the second one, is it available?", same()).about(SECOND, Availability),
        ]),
        script("how much is the first", [
            ask("food tours", want().groups(&["Food Tours"])),
            ask("how much is the first one?", same()).about(FIRST, Price),
        ]),
        script("paging", [
            ask("museum tours", want().groups(&["Museum Tours"])),
            ask("more", same()).unseen(),
            ask("show me more", same()).unseen(),
        ]),
        script("an excluded group wanted again", [
            ask("no food tours", want().not(&["Food Tours"])),
            ask(
                "food tours with wine tasting",
                previous().groups(&["Food Tours"]).tags(&["wine tasting"]).absent(&["excluded_groups"]),
            ),
        ]),
        script("more like the first", [
            ask("tours in Spanish", want().language("es")),
            ask("more like the first one", previous().like_shown(FIRST)),
        ]),
        script("pricier", [
            ask("bike tours", want().groups(&["Bike Tours"])),
            ask("pricier", previous().pricier()),
        ]),
        script("is the last available", [
            ask("tours for adults", want().adults()),
            ask("the last one, is it available?", same()).about(LAST, Availability),
        ]),
        script("next", [
            ask("cheap tours", want().cheap()),
            ask("next", same()).unseen(),
        ]),
        script("a guide, a price, a question", [
            ask("walking tours", want().groups(&["Walking Tours"])),
            ask("with an Italian guide", previous().language("it")),
            ask("under 80 euros", previous().under(80.0)),
            ask("what does it cost?", same()).about(FIRST, Price),
        ]),
        script("adults, then a group, then more", [
            ask("18+", want().adults()),
            ask("boat tours", previous().groups(&["Boat Tours"])),
            ask("more", same()).unseen(),
        ]),
        script("a tag, a language, in stock", [
            ask("wine tasting", want().tags(&["wine tasting"])),
            ask("in German", previous().language("de")),
            ask("is the first one in stock?", same()).about(FIRST, Availability),
        ]),
    ]
}
