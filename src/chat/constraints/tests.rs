use super::*;
use crate::chat::dictionary::LabelDictionary;

fn vocabulary() -> LabelDictionary {
    LabelDictionary::new(
        &[
            "Comedy",
            "Thriller",
            "Sci-Fi",
            "Film-Noir",
            "Children",
            "Romance",
            "Drama",
            "Walking Tours",
        ],
        &["dark comedy", "twist ending", "wine tasting"],
    )
}

fn read(message: &str) -> Extracted {
    extract(message, &vocabulary())
}

fn ceiling(amount: f64, inclusive: bool) -> Option<PriceBound> {
    Some(PriceBound::Ceiling(PriceLimit { amount, inclusive }))
}

fn floor(amount: f64, inclusive: bool) -> Option<PriceBound> {
    Some(PriceBound::Floor(PriceLimit { amount, inclusive }))
}

fn strings(values: &[&str]) -> Vec<String> {
    values.iter().map(|v| (*v).to_owned()).collect()
}

#[test]
fn price_ceilings() {
    assert_eq!(read("comedies under 20").price, ceiling(20.0, false));
    assert_eq!(read("below $15 please").price, ceiling(15.0, false));
    assert_eq!(read("less than 30 dollars").price, ceiling(30.0, false));
    assert_eq!(read("max 25").price, ceiling(25.0, true));
    assert_eq!(read("up to €40").price, ceiling(40.0, true));
    assert_eq!(read("cheaper than 10").price, ceiling(10.0, false));
    assert_eq!(read("no more than 12.50").price, ceiling(12.5, true));
    assert_eq!(read("at most 9").price, ceiling(9.0, true));
    assert_eq!(read("<30").price, ceiling(30.0, false));
    assert_eq!(read("my budget is 1k").price, ceiling(1000.0, true));
    assert_eq!(read("something for $20").price, ceiling(20.0, true));
    assert_eq!(read("something for 20€").price, ceiling(20.0, true));
}

#[test]
fn price_floors() {
    assert_eq!(read("over 50").price, floor(50.0, false));
    assert_eq!(read("more than 20").price, floor(20.0, false));
    assert_eq!(read("at least 10").price, floor(10.0, true));
    assert_eq!(read("above $1,000").price, floor(1000.0, false));
    assert_eq!(read("more expensive than 30").price, floor(30.0, false));
    let pricier = read("more expensive than 30");
    assert_eq!(
        pricier.relative, None,
        "an amount makes it a floor, not a relative price"
    );
}

#[test]
fn price_ranges() {
    let range = Some(PriceBound::Range(10.0, 20.0));
    assert_eq!(read("between 10 and 20").price, range);
    assert_eq!(read("from 10 to 20").price, range);
    assert_eq!(read("$10-$20").price, range);
    assert_eq!(read("10 to 20 dollars").price, range);
    assert_eq!(read("priced 10-20").price, range);
    assert_eq!(read("between 20 and 10").price, range, "ends are ordered");
    assert_eq!(
        read("movies from 1990 to 1995").price,
        None,
        "no currency: years, not prices"
    );
}

#[test]
fn numbers_that_are_not_prices() {
    assert_eq!(read("under 2 hours").price, None);
    assert_eq!(read("over 50 years old").price, None);
    assert_eq!(read("toy story 2").price, None);
    assert_eq!(read("toy story 2").terms, strings(&["toy", "story", "2"]));
    let kids = read("for kids under 10");
    assert_eq!(kids.price, None, "an age after kids");
    assert_eq!(kids.audience, Some(Audience::Kids));
    let young = read("under 12 years");
    assert_eq!(young.price, None);
    assert_eq!(young.audience, Some(Audience::Kids));
}

#[test]
fn relative_prices() {
    assert_eq!(read("cheaper").relative, Some(RelativePrice::Cheaper));
    assert_eq!(read("something less expensive").relative, Some(RelativePrice::Cheaper));
    assert_eq!(read("not too expensive").relative, Some(RelativePrice::Cheaper));
    assert_eq!(read("more expensive").relative, Some(RelativePrice::Pricier));
    assert_eq!(read("pricier ones").relative, Some(RelativePrice::Pricier));
    assert!(read("cheaper").terms.is_empty());
    assert!(read("something less expensive").terms.is_empty());
}

#[test]
fn groups_with_plural_tolerance_and_multiword_names() {
    assert_eq!(read("comedies under 20").groups, strings(&["Comedy"]));
    assert_eq!(read("any good thrillers?").groups, strings(&["Thriller"]));
    assert_eq!(read("Sci-Fi or Film-Noir").groups, strings(&["Sci-Fi", "Film-Noir"]));
    assert_eq!(read("some sci fi").groups, strings(&["Sci-Fi"]));
    assert_eq!(read("scifi").groups, strings(&["Sci-Fi"]));
    assert_eq!(read("romantic comedies").groups, strings(&["Romance", "Comedy"]));
    assert_eq!(read("walking tours in rome").groups, strings(&["Walking Tours"]));
    assert_eq!(read("walking tours in rome").terms, strings(&["rome"]));
    assert!(read("westerns").groups.is_empty(), "not in the vocabulary");
    assert_eq!(read("westerns").terms, strings(&["westerns"]));
}

#[test]
fn tags_and_longest_names_first() {
    let extracted = read("a dark comedy with a twist ending");
    assert_eq!(extracted.tags, strings(&["dark comedy", "twist ending"]));
    assert!(
        extracted.groups.is_empty(),
        "the longer tag wins over the group inside it"
    );
    assert!(extracted.terms.is_empty());
}

#[test]
fn languages() {
    let french = read("in French");
    assert_eq!(french.language.as_ref().map(|l| l.code.as_str()), Some("fr"));
    assert!(french.terms.is_empty());
    assert_eq!(read("spanish").language.map(|l| l.name), Some("Spanish".to_owned()));
    let guide = read("a walking tour with an English guide");
    assert_eq!(guide.language.map(|l| l.code), Some("en".to_owned()));
    assert_eq!(guide.groups, strings(&["Walking Tours"]));
    assert!(guide.terms.is_empty(), "{:?}", guide.terms);
    assert_eq!(language_of("en-GB").map(|l| l.code), Some("en".to_owned()));
    assert_eq!(language_of("Deutsch").map(|l| l.code), Some("de".to_owned()));
    assert_eq!(language_of("klingon"), None);
}

#[test]
fn audiences() {
    for message in [
        "for kids",
        "something for the children",
        "family friendly",
        "children's",
    ] {
        assert_eq!(read(message).audience, Some(Audience::Kids), "{message}");
    }
    for message in ["for adults", "18+", "grown ups only", "over 21 years"] {
        assert_eq!(read(message).audience, Some(Audience::Adults), "{message}");
    }
    assert_eq!(read("ages 6-12").audience, Some(Audience::Kids));
    assert_eq!(read("ages 6-12").price, None);
    assert!(
        read("for kids").groups.is_empty(),
        "children words are the audience, not the group"
    );
}

#[test]
fn free_text_terms_drop_stopwords_and_consumed_words() {
    assert_eq!(read("something with love in it").terms, strings(&["love"]));
    assert_eq!(
        read("Show me comedies about space travel under $20").terms,
        strings(&["space", "travel"])
    );
    assert!(read("comedies under 10").terms.is_empty());
    assert!(read("any price").terms.is_empty());
    assert!(read("").terms.is_empty());
}

#[test]
fn commands() {
    assert!(read("any price").clear_price);
    assert!(read("any genre").clear_groups);
    assert!(read("any language").clear_language);
    assert!(read("any age").clear_audience);
    assert!(read("let's start over").reset);
    assert!(read("also thrillers").additive);
    assert!(read("and dramas").additive);
    assert!(read("thrillers as well").additive);
    assert!(!read("comedies and thrillers").additive);
}

fn turn(constraints: &mut Constraints, message: &str, last_prices: &[f64]) -> Vec<Note> {
    constraints.apply(&read(message), last_prices)
}

#[test]
fn a_conversation_carries_and_refines() {
    let mut constraints = Constraints::default();
    turn(&mut constraints, "comedies under 10", &[]);
    assert_eq!(constraints.groups, strings(&["Comedy"]));
    assert_eq!(constraints.max_price, Some(PriceLimit::exclusive(10.0)));
    assert!(constraints.query.is_empty());

    turn(&mut constraints, "something with love in it", &[2.0, 4.0, 6.0, 9.0]);
    assert_eq!(constraints.query, strings(&["love"]));
    assert_eq!(constraints.groups, strings(&["Comedy"]), "kept");
    assert_eq!(constraints.max_price, Some(PriceLimit::exclusive(10.0)), "kept");

    let notes = turn(&mut constraints, "cheaper", &[2.0, 4.0, 6.0, 9.0]);
    assert_eq!(notes, vec![Note::RelativeTo(RelativePrice::Cheaper, 5.0)]);
    assert_eq!(constraints.max_price, Some(PriceLimit::exclusive(5.0)));
    assert_eq!(
        constraints.query,
        strings(&["love"]),
        "no content words: the query stays"
    );

    turn(&mut constraints, "for kids", &[1.0, 3.0]);
    assert_eq!(constraints.audience, Some(Audience::Kids));
    assert_eq!(constraints.max_price, Some(PriceLimit::exclusive(5.0)));
    assert_eq!(constraints.groups, strings(&["Comedy"]));
    assert!(constraints.price_allows(4.99) && !constraints.price_allows(5.0));
}

#[test]
fn price_merge_rules() {
    let mut constraints = Constraints::default();
    turn(&mut constraints, "at least 10", &[]);
    turn(&mut constraints, "under 30", &[]);
    assert_eq!(constraints.min_price, Some(PriceLimit::inclusive(10.0)));
    assert_eq!(constraints.max_price, Some(PriceLimit::exclusive(30.0)));
    turn(&mut constraints, "under 5", &[]);
    assert_eq!(constraints.min_price, None, "a floor above the new ceiling goes");
    turn(&mut constraints, "between 20 and 40", &[]);
    assert_eq!(constraints.min_price, Some(PriceLimit::inclusive(20.0)));
    assert_eq!(constraints.max_price, Some(PriceLimit::inclusive(40.0)));
    turn(&mut constraints, "over 50", &[]);
    assert_eq!(constraints.max_price, None, "a ceiling below the new floor goes");
    turn(&mut constraints, "any price", &[]);
    assert_eq!((constraints.min_price, constraints.max_price), (None, None));
}

#[test]
fn relative_price_without_a_previous_answer() {
    let mut constraints = Constraints::default();
    let notes = turn(&mut constraints, "cheaper", &[]);
    assert_eq!(notes, vec![Note::NothingToCompare(RelativePrice::Cheaper)]);
    assert_eq!(constraints.max_price, None);
    turn(&mut constraints, "under 20", &[]);
    let notes = turn(&mut constraints, "cheaper", &[]);
    assert_eq!(notes, vec![Note::RelativeToBound(RelativePrice::Cheaper)]);
    assert_eq!(constraints.max_price, Some(PriceLimit::exclusive(15.0)));
}

#[test]
fn more_expensive_lifts_the_ceiling() {
    let mut constraints = Constraints::default();
    turn(&mut constraints, "comedies under 10", &[]);
    turn(&mut constraints, "more expensive", &[3.0, 5.0, 8.0]);
    assert_eq!(constraints.min_price, Some(PriceLimit::exclusive(5.0)));
    assert_eq!(constraints.max_price, None);
    assert!(constraints.price_allows(50.0) && !constraints.price_allows(5.0));
}

#[test]
fn group_merge_rules() {
    let mut constraints = Constraints::default();
    turn(&mut constraints, "comedies", &[]);
    turn(&mut constraints, "thrillers", &[]);
    assert_eq!(constraints.groups, strings(&["Thriller"]), "a new group replaces");
    turn(&mut constraints, "also dramas", &[]);
    assert_eq!(constraints.groups, strings(&["Thriller", "Drama"]));
    turn(&mut constraints, "or comedies", &[]);
    assert_eq!(constraints.groups, strings(&["Thriller", "Drama", "Comedy"]));
    turn(&mut constraints, "comedies and thrillers", &[]);
    assert_eq!(constraints.groups, strings(&["Comedy", "Thriller"]));
    turn(&mut constraints, "with a twist ending", &[]);
    assert_eq!(constraints.tags, strings(&["twist ending"]));
    assert_eq!(
        constraints.groups,
        strings(&["Comedy", "Thriller"]),
        "tags leave groups alone"
    );
    turn(&mut constraints, "any genre", &[]);
    assert!(constraints.groups.is_empty() && constraints.tags.is_empty());
}

#[test]
fn language_audience_and_reset() {
    let mut constraints = Constraints::default();
    turn(&mut constraints, "walking tours in French for kids under $30", &[]);
    assert_eq!(constraints.language.as_ref().map(|l| l.code.as_str()), Some("fr"));
    assert_eq!(constraints.audience, Some(Audience::Kids));
    assert_eq!(constraints.max_price, Some(PriceLimit::exclusive(30.0)));
    assert_eq!(constraints.groups, strings(&["Walking Tours"]));
    assert!(constraints.is_filtering());
    turn(&mut constraints, "in spanish", &[]);
    assert_eq!(constraints.language.as_ref().map(|l| l.code.as_str()), Some("es"));
    turn(&mut constraints, "any language, any age", &[]);
    assert_eq!((constraints.language.clone(), constraints.audience), (None, None));
    turn(&mut constraints, "start over: wine tasting", &[]);
    assert_eq!(
        constraints,
        Constraints {
            tags: strings(&["wine tasting"]),
            ..Constraints::default()
        }
    );
}

#[test]
fn median_of_prices() {
    assert_eq!(median(&[]), None);
    assert_eq!(median(&[3.0]), Some(3.0));
    assert_eq!(median(&[9.0, 1.0, 4.0]), Some(4.0));
    assert_eq!(median(&[1.0, 2.0, 4.0, 8.0]), Some(3.0));
}
