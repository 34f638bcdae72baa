use super::*;
use crate::chat::constraints::YearRange;
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
            "Horror",
            "Animation",
            "Bike Tours",
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
    assert_eq!(read("not too expensive").relative, None);
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
        read("Show me comedies about time travel under $20").terms,
        strings(&["time", "travel"])
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
    let last = LastAnswer {
        ids: (0..last_prices.len()).map(|n| n.to_string()).collect(),
        prices: last_prices.to_vec(),
        focus: None,
    };
    constraints.apply(&read(message), &last, &Scale::default())
}

/// A catalog whose prices have quartiles 2, 4, 6, 9 and whose years run to 2018.
const SCALE: Scale = Scale {
    prices: Some([2.0, 4.0, 6.0, 9.0]),
    years: Some((2018, 1980)),
};

fn turn_on_scale(constraints: &mut Constraints, message: &str, last: &LastAnswer) -> Vec<Note> {
    constraints.apply(&read(message), last, &SCALE)
}

#[test]
fn a_currency_makes_a_number_a_price_not_an_age() {
    let extracted = read("animated movies for kids under 10 dollars");
    assert_eq!(extracted.groups, strings(&["Animation"]));
    assert_eq!(extracted.audience, Some(Audience::Kids));
    assert_eq!(extracted.price, ceiling(10.0, false));
    assert_eq!(read("for kids under $10").price, ceiling(10.0, false));
    assert_eq!(read("5 bucks max").price, ceiling(5.0, true));
    assert_eq!(read("under 5 USD").price, ceiling(5.0, false));
    assert_eq!(
        read("between 5 and 10 dollars").price,
        Some(PriceBound::Range(5.0, 10.0))
    );
}

#[test]
fn price_bands_come_from_the_catalogs_prices() {
    for (message, band) in [
        ("cheap comedies", PriceBand::Cheap),
        ("cheapest", PriceBand::Cheapest),
        ("not too expensive", PriceBand::Moderate),
        ("what's cheap?", PriceBand::Cheap),
        ("something affordable", PriceBand::Cheap),
        ("premium picks", PriceBand::Premium),
        ("expensive ones", PriceBand::Premium),
    ] {
        let extracted = read(message);
        assert_eq!(extracted.band, Some(band), "{message}");
        assert!(extracted.terms.is_empty(), "{message}: {:?}", extracted.terms);
    }
    let mut constraints = Constraints::default();
    let notes = turn_on_scale(&mut constraints, "cheap comedies", &LastAnswer::default());
    assert_eq!(notes, vec![Note::Band(PriceBand::Cheap)]);
    assert_eq!(constraints.max_price, Some(PriceLimit::inclusive(4.0)));
    assert_eq!(constraints.groups, strings(&["Comedy"]));
    turn_on_scale(&mut constraints, "premium", &LastAnswer::default());
    assert_eq!(
        (constraints.min_price, constraints.max_price),
        (Some(PriceLimit::inclusive(9.0)), None)
    );
}

#[test]
fn relative_words_need_an_earlier_priced_answer() {
    let mut constraints = Constraints::default();
    let notes = turn_on_scale(&mut constraints, "cheaper", &LastAnswer::default());
    assert_eq!(notes, vec![Note::Band(PriceBand::Cheap)], "read as cheap");
    assert_eq!(constraints.max_price, Some(PriceLimit::inclusive(4.0)));
    let last = LastAnswer {
        ids: strings(&["a", "b", "c"]),
        prices: vec![1.0, 3.0, 3.5],
        focus: None,
    };
    turn_on_scale(&mut constraints, "cheaper", &last);
    assert_eq!(constraints.max_price, Some(PriceLimit::exclusive(3.0)));
    turn_on_scale(&mut constraints, "pricier", &last);
    assert_eq!(constraints.min_price, Some(PriceLimit::exclusive(3.0)));
    assert_eq!(constraints.max_price, None);
}

#[test]
fn negation_rules_groups_out_until_named_again() {
    for message in [
        "no horror please",
        "not scary",
        "without horror",
        "anything but horror",
        "skip the horror",
        "I don't want horror",
        "nothing scary",
    ] {
        let extracted = read(message);
        assert_eq!(extracted.excluded_groups, strings(&["Horror"]), "{message}");
        assert!(extracted.groups.is_empty(), "{message}");
        assert!(extracted.terms.is_empty(), "{message}: {:?}", extracted.terms);
    }
    assert_eq!(
        read("no horror or thrillers").excluded_groups,
        strings(&["Horror", "Thriller"])
    );
    assert_eq!(read("comedies but no horror").groups, strings(&["Comedy"]));
    let mut constraints = Constraints::default();
    turn(&mut constraints, "comedies, no horror", &[]);
    assert_eq!(constraints.excluded_groups, strings(&["Horror"]));
    turn(&mut constraints, "thrillers", &[]);
    assert_eq!(constraints.excluded_groups, strings(&["Horror"]), "exclusions persist");
    turn(&mut constraints, "horror after all", &[]);
    assert!(constraints.excluded_groups.is_empty());
    assert_eq!(constraints.groups, strings(&["Horror"]));
}

#[test]
fn synonyms_name_the_catalogs_groups() {
    assert_eq!(read("cartoons").groups, strings(&["Animation"]));
    assert_eq!(read("show me cartoons for kids").groups, strings(&["Animation"]));
    assert_eq!(read("something scary").groups, strings(&["Horror"]));
    assert_eq!(read("funny stuff").groups, strings(&["Comedy"]));
    assert_eq!(read("space adventures").groups, strings(&["Sci-Fi"]));
    assert_eq!(read("science fiction").groups, strings(&["Sci-Fi"]));
    assert!(read("cowboys").groups.is_empty(), "no Western group here");
}

#[test]
fn years_and_decades() {
    let nineties = Some(YearRange {
        from: Some(1990),
        to: Some(1999),
    });
    for message in [
        "films from the 90s",
        "90s",
        "1990s comedies",
        "the nineties",
        "from 1990 to 1999",
    ] {
        let extracted = read(message);
        assert_eq!(extracted.years, nineties, "{message}");
        assert!(extracted.terms.is_empty(), "{message}: {:?}", extracted.terms);
        assert_eq!(extracted.price, None, "{message}");
    }
    assert_eq!(
        read("before 1980").years,
        Some(YearRange {
            from: None,
            to: Some(1979)
        })
    );
    assert_eq!(
        read("after 2010").years,
        Some(YearRange {
            from: Some(2011),
            to: None
        })
    );
    assert_eq!(
        read("in 1995").years,
        Some(YearRange {
            from: Some(1995),
            to: Some(1995)
        })
    );
    assert_eq!(read("2001 a space odyssey").years, None, "a bare year may be a title");
    assert_eq!(read("recent comedies").year_word, Some(YearWord::Recent));
    let mut constraints = Constraints::default();
    turn_on_scale(&mut constraints, "old classics", &LastAnswer::default());
    assert_eq!(
        constraints.years,
        Some(YearRange {
            from: None,
            to: Some(1980)
        })
    );
    turn_on_scale(&mut constraints, "recent ones", &LastAnswer::default());
    assert_eq!(
        constraints.years,
        Some(YearRange {
            from: Some(2014),
            to: None
        })
    );
}

#[test]
fn references_questions_likeness_and_paging() {
    let second = read("the second one, is it available?");
    assert_eq!(second.reference, Some(Reference::Position(1)));
    assert_eq!(second.ask, Some(Ask::Availability));
    assert!(second.terms.is_empty(), "{:?}", second.terms);
    let price = read("how much is the third one?");
    assert_eq!(
        (price.reference, price.ask),
        (Some(Reference::Position(2)), Some(Ask::Price))
    );
    let it = read("what does it cost?");
    assert_eq!((it.reference, it.ask), (Some(Reference::It), Some(Ask::Price)));
    let like = read("show me more like the first one");
    assert_eq!(like.similar, Some(Similar::Reference(Reference::Position(0))));
    assert_eq!((like.reference, like.more), (None, false));
    assert!(like.terms.is_empty(), "{:?}", like.terms);
    let title = read("something like Toy Story");
    assert_eq!(title.similar, Some(Similar::Title(strings(&["toy", "story"]))));
    assert!(title.terms.is_empty());
    let nemo = read("movies similar to Finding Nemo for kids");
    assert_eq!(nemo.similar, Some(Similar::Title(strings(&["finding", "nemo"]))));
    assert_eq!(nemo.audience, Some(Audience::Kids));
    assert_eq!(read("I'd like comedies").similar, None, "like as a verb");
    for message in ["more", "show me more", "anything else?", "next", "other ones"] {
        let extracted = read(message);
        assert!(extracted.more, "{message}");
        assert!(extracted.terms.is_empty(), "{message}: {:?}", extracted.terms);
    }
    assert!(read("available comedies").available);
    assert_eq!(read("available comedies").ask, None);
    for message in [
        "popular movies",
        "top movies",
        "what do you have?",
        "recommend me something",
        "hello",
    ] {
        assert!(read(message).terms.is_empty(), "{message}: {:?}", read(message).terms);
    }
    assert_eq!(read("top gun").terms, strings(&["top", "gun"]));
}

#[test]
fn a_question_about_an_item_changes_nothing() {
    let last = LastAnswer {
        ids: strings(&["a", "b"]),
        prices: vec![1.0, 2.0],
        focus: None,
    };
    let mut constraints = Constraints::default();
    turn_on_scale(&mut constraints, "comedies under 10", &last);
    let before = constraints.clone();
    assert!(turn_on_scale(&mut constraints, "the second one, is it available?", &last).is_empty());
    assert_eq!(constraints, before);
    turn_on_scale(&mut constraints, "more like the second one", &last);
    assert_eq!(constraints.similar_to.as_deref(), Some("b"));
    turn_on_scale(&mut constraints, "love", &last);
    assert_eq!(constraints.similar_to, None, "a new search ends the likeness");
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

#[test]
fn dashes_coordination_and_catalog_names_over_audience_words() {
    assert_eq!(read("budget-friendly movies").band, Some(PriceBand::Cheap));
    assert!(read("budget-friendly movies").terms.is_empty());
    assert_eq!(read("something high-end").band, Some(PriceBand::Premium));
    assert_eq!(read("mid-range thrillers").band, Some(PriceBand::Moderate));
    assert_eq!(
        read("I don't want anything scary").excluded_groups,
        strings(&["Horror"])
    );
    assert_eq!(
        read("walking or bike tours").groups,
        strings(&["Walking Tours", "Bike Tours"])
    );
    let tours = LabelDictionary::new(&["Walking Tours"], &["family friendly"]);
    let family = extract("family friendly tours", &tours);
    assert_eq!(family.tags, strings(&["family friendly"]), "the catalog's tag wins");
    assert_eq!(family.audience, None);
    assert_eq!(
        read("family friendly").audience,
        Some(Audience::Kids),
        "no such tag here"
    );
    let tour = read("something like Historic Centre Walking Tour 1");
    assert_eq!(
        tour.similar,
        Some(Similar::Title(strings(&["historic", "centre", "walking", "tour", "1"])))
    );
    assert!(tour.groups.is_empty());
    assert_eq!(read("something like a comedy").similar, None);
}

#[test]
fn words_after_a_negator_are_no_search_terms() {
    let extracted = read("comedies, no gore please");
    assert_eq!(extracted.groups, strings(&["Comedy"]));
    assert!(extracted.terms.is_empty(), "{:?}", extracted.terms);
    assert_eq!(extracted.negated_terms, strings(&["gore"]));
    let kept = read("no horror, something with love");
    assert_eq!(
        kept.terms,
        strings(&["love"]),
        "a negator reaches only the words right after it"
    );
    assert!(kept.negated_terms.is_empty());
}
