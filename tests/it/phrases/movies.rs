//! The MovieLens cases: every row of issue 18's table, and variations of each kind
//! of phrase. Genres are MovieLens's own spelling ("Sci-Fi", "Children", ...); kids
//! means the Children group; a movie's year is the "(YYYY)" of its title.

use serde_json::json;

use super::case::{ask, cases, script, Case, Question::*, Turn};
use super::catalog::Catalog;
use super::run::{chat, matching_problems, Failure, Outcome};
use super::want::{previous, same, want, FIRST, LAST, SECOND, THIRD};
use crate::common::{event, TestServer, EVENTS};

pub fn movie_cases() -> Vec<Case> {
    let single = [
        prices(),
        bands(),
        meanings(),
        negations(),
        years(),
        open_asks(),
        likeness(),
    ];
    cases(single.concat(), scripts())
}

#[rustfmt::skip] // a table: one case a line
fn prices() -> Vec<Turn> {
    vec![
        ask("under $5", want().under(5.0).no_query()),
        ask("something under 10 dollars", want().under(10.0).no_query()),
        ask("anything under 10", want().under(10.0).no_query()).says("under 10"),
        ask("between 5 and 10 dollars", want().between(5.0, 10.0).no_query()),
        ask("movies under 5 bucks", want().under(5.0).no_query()),
        ask("below $8", want().under(8.0).no_query()),
        ask("less than 12 dollars", want().under(12.0).no_query()),
        ask("under 7 USD", want().under(7.0).no_query()),
        ask("films under €6", want().under(6.0).no_query()),
        ask("at most $6", want().at_most(6.0).no_query()),
        ask("up to 7 dollars", want().at_most(7.0).no_query()),
        ask("max 9 bucks", want().at_most(9.0).no_query()),
        ask("no more than $4", want().at_most(4.0).no_query().absent(&["excluded_groups"])),
        ask("from $5 to $10", want().between(5.0, 10.0).no_query()),
        ask("$5-$10", want().between(5.0, 10.0).no_query()),
        ask("over $25", want().over(25.0).no_query()),
        ask("above 20 dollars", want().over(20.0).no_query()),
        ask("more than 27 dollars", want().over(27.0).no_query()),
        ask("at least $28", want().at_least(28.0).no_query()),
        ask("dramas under 3 dollars", want().groups(&["Drama"]).under(3.0).no_query()),
        ask("thrillers between 10 and 20 dollars", want().groups(&["Thriller"]).between(10.0, 20.0)),
        ask("a horror movie under 2 dollars", want().groups(&["Horror"]).under(2.0)),
        ask("sci-fi for less than 4 dollars", want().groups(&["Sci-Fi"]).under(4.0)),
        ask("westerns for at most 5 bucks", want().groups(&["Western"]).at_most(5.0)),
        ask("documentaries up to $3", want().groups(&["Documentary"]).at_most(3.0)),
        ask("comedies over 20 USD", want().groups(&["Comedy"]).over(20.0)),
        ask("war movies under 15 dollars", want().groups(&["War"]).under(15.0)),
        ask("comedies under $0.50", want().groups(&["Comedy"]).under(0.5)).finds_nothing(),
        ask(
            "animated movies for kids under 10 dollars",
            want().groups(&["Animation"]).kids().under(10.0).no_query(),
        ),
        // Without a currency, "under 10" after "kids" is an age.
        ask(
            "cartoons for kids under 10",
            want().groups(&["Animation"]).kids().absent(&["max_price"]),
        ),
        ask("comedies for kids under 8 bucks", want().groups(&["Comedy"]).kids().under(8.0)),
    ]
}

#[rustfmt::skip] // a table: one case a line
fn bands() -> Vec<Turn> {
    vec![
        ask("cheap comedies", want().groups(&["Comedy"]).cheap().no_query()),
        ask("cheapest", want().cheapest().no_query()),
        ask("not too expensive", want().mid_priced().no_query().absent(&["excluded_groups"])),
        ask("what's cheap?", want().cheap().no_query()),
        ask("inexpensive dramas", want().groups(&["Drama"]).cheap()),
        ask("affordable thrillers", want().groups(&["Thriller"]).cheap()),
        ask("budget-friendly movies", want().cheap().no_query()),
        ask("low cost horror films", want().groups(&["Horror"]).cheap()),
        ask("bargain westerns", want().groups(&["Western"]).cheap()),
        ask("reasonably priced musicals", want().groups(&["Musical"]).mid_priced()),
        ask("moderately priced war movies", want().groups(&["War"]).mid_priced()),
        ask("mid-range documentaries", want().groups(&["Documentary"]).mid_priced()),
        ask("not so expensive romance", want().groups(&["Romance"]).mid_priced().absent(&["excluded_groups"])),
        ask("premium", want().premium().no_query()),
        ask("expensive dramas", want().groups(&["Drama"]).premium()),
        ask("luxury films", want().premium().no_query()),
        ask("something high-end", want().premium().no_query()),
        ask("upscale crime movies", want().groups(&["Crime"]).premium()),
        ask("pricey musicals", want().groups(&["Musical"]).premium()),
        ask("the cheapest animated movies", want().groups(&["Animation"]).cheapest()),
        // Relative words without an earlier answer read as the bands.
        ask("cheaper", want().cheap().no_query()),
        ask("less expensive comedies", want().groups(&["Comedy"]).cheap()),
        ask("more expensive", want().premium().no_query()),
        ask("pricier", want().premium().no_query()),
    ]
}

#[rustfmt::skip] // a table: one case a line
fn meanings() -> Vec<Turn> {
    vec![
        ask("cartoons", want().groups(&["Animation"]).no_query()),
        ask("show me cartoons for kids", want().groups(&["Animation"]).kids().no_query()).says("for kids"),
        ask("a cartoon", want().groups(&["Animation"])),
        ask("animated films", want().groups(&["Animation"])),
        ask("anime", want().groups(&["Animation"])),
        ask("something scary", want().groups(&["Horror"]).no_query()),
        ask("spooky movies", want().groups(&["Horror"])),
        ask("creepy films", want().groups(&["Horror"])),
        ask("something funny", want().groups(&["Comedy"]).no_query()),
        ask("hilarious movies", want().groups(&["Comedy"])),
        ask("space movies", want().groups(&["Sci-Fi"])),
        ask("science fiction", want().groups(&["Sci-Fi"])),
        ask("futuristic films", want().groups(&["Sci-Fi"])),
        ask("movies with aliens", want().groups(&["Sci-Fi"])),
        ask("romantic movies", want().groups(&["Romance"])),
        ask("a detective movie", want().groups(&["Mystery"])),
        ask("a good whodunit", want().groups(&["Mystery"])),
        ask("cowboy movies", want().groups(&["Western"])),
        ask("cowboys", want().groups(&["Western"])),
        ask("comedies", want().groups(&["Comedy"]).no_query()),
        ask("thrillers", want().groups(&["Thriller"])),
        ask("documentaries", want().groups(&["Documentary"])),
        ask("musicals", want().groups(&["Musical"])),
        ask("film noir", want().groups(&["Film-Noir"])),
        ask("war movies", want().groups(&["War"])),
        ask("fantasy films", want().groups(&["Fantasy"])),
        ask("adventure movies", want().groups(&["Adventure"])),
        ask("crime dramas", want().groups(&["Crime", "Drama"])),
        ask("comedies and thrillers", want().groups(&["Comedy", "Thriller"])),
        ask("kids movies", want().kids()),
        ask("something for children", want().kids()),
        ask("movies for adults", want().adults()),
        ask("action movies for adults", want().groups(&["Action"]).adults()),
        ask("mystery films for kids", want().groups(&["Mystery"]).kids()),
    ]
}

#[rustfmt::skip] // a table: one case a line
fn negations() -> Vec<Turn> {
    vec![
        ask("no horror please", want().not(&["Horror"]).no_query()).says("not Horror"),
        ask("no horror", want().not(&["Horror"]).no_query()),
        ask("not scary", want().not(&["Horror"]).no_query()),
        ask("comedies without romance", want().groups(&["Comedy"]).not(&["Romance"])),
        ask("anything but horror", want().not(&["Horror"]).no_query()),
        ask("skip the comedies", want().not(&["Comedy"]).no_query()),
        ask("anything except dramas", want().not(&["Drama"]).no_query()),
        ask("I don't want horror", want().not(&["Horror"]).no_query()),
        ask("thrillers, no horror", want().groups(&["Thriller"]).not(&["Horror"])),
        ask("not comedies", want().not(&["Comedy"])),
        ask("without musicals", want().not(&["Musical"])),
        ask("no dramas and no horror", want().not(&["Drama", "Horror"])),
        ask("cartoons, no musicals", want().groups(&["Animation"]).not(&["Musical"])),
        ask("I don't want anything scary", want().not(&["Horror"])),
        ask("funny movies but not romantic", want().groups(&["Comedy"]).not(&["Romance"])),
        ask("sci-fi without horror under 10 dollars", want().groups(&["Sci-Fi"]).not(&["Horror"]).under(10.0)),
        ask("no cartoons", want().not(&["Animation"])),
    ]
}

#[rustfmt::skip] // a table: one case a line
fn years() -> Vec<Turn> {
    vec![
        ask("films from the 90s", want().years(1990, 1999).no_query()).says("from 1990 to 1999"),
        ask("80s movies", want().years(1980, 1989).no_query()),
        ask("movies from the 1990s", want().years(1990, 1999)),
        ask("something from the nineties", want().years(1990, 1999)),
        ask("2000s comedies", want().groups(&["Comedy"]).years(2000, 2009)),
        ask("horror from the 2000s", want().groups(&["Horror"]).years(2000, 2009)),
        ask("a movie from 1995", want().years(1995, 1995)),
        ask("comedies in 1999", want().groups(&["Comedy"]).years(1999, 1999)),
        ask("movies before 1980", want().until(1979)),
        ask("films after 2010", want().since(2011)),
        ask("dramas since 2015", want().groups(&["Drama"]).since(2015)),
        ask("recent comedies", want().groups(&["Comedy"]).recent()),
        ask("the newest movies", want().recent()),
        ask("latest thrillers", want().groups(&["Thriller"]).recent()),
        ask("old westerns", want().groups(&["Western"]).old()),
        ask("classic dramas", want().groups(&["Drama"]).old()),
        ask("vintage horror", want().groups(&["Horror"]).old()),
        ask("older films", want().old()),
        ask("dramas from the 80s under $10", want().groups(&["Drama"]).years(1980, 1989).under(10.0)),
        ask("90s cartoons for kids", want().groups(&["Animation"]).kids().years(1990, 1999)),
    ]
}

/// Nothing specific: the personalized ranking of the whole catalog.
#[rustfmt::skip] // a table: one case a line
fn open_asks() -> Vec<Turn> {
    vec![
        ask("what do you have?", want().no_constraints()),
        ask("recommend me something", want().no_constraints()),
        ask("hello", want().no_constraints()),
        ask("hi", want().no_constraints()),
        ask("popular movies", want().no_constraints()),
        ask("top movies", want().no_constraints()),
        ask("best movies", want().no_constraints()),
    ]
}

#[rustfmt::skip] // a table: one case a line
fn likeness() -> Vec<Turn> {
    vec![
        ask("something like Toy Story", want().like("Toy Story (1995)").no_query()),
        ask("movies similar to Finding Nemo", want().like("Finding Nemo (2003)").no_query()),
        ask("like Toy Story", want().like("Toy Story (1995)")),
        ask("something like Jumanji", want().like("Jumanji (1995)")),
        ask("comedies like Shrek", want().groups(&["Comedy"]).like("Shrek (2001)")),
        ask("films similar to Toy Story under 10 dollars", want().like("Toy Story (1995)").under(10.0)),
    ]
}

#[rustfmt::skip] // a table: one case a line
fn scripts() -> Vec<Case> {
    vec![
        script("refine, then start over", [
            ask("comedies under 10", want().groups(&["Comedy"]).under(10.0).no_query()),
            ask("cheaper", previous().cheaper()).says("cheaper"),
            ask("for kids", previous().kids()).says("for kids"),
            ask("start over", want().no_constraints()),
        ]),
        script("more like the first one", [
            ask("cartoons", want().groups(&["Animation"]).no_query()),
            ask("show me more like the first one", previous().like_shown(FIRST)),
        ]),
        script("paging", [
            ask("dramas", want().groups(&["Drama"]).no_query()),
            ask("more", same()).unseen(),
            ask("show me more", same()).unseen(),
        ]),
        script("next, anything else", [
            ask("westerns", want().groups(&["Western"])),
            ask("next", same()).unseen(),
            ask("anything else", same()).unseen(),
        ]),
        script("what else", [
            ask("cheap comedies", want().groups(&["Comedy"]).cheap()),
            ask("what else", same()).unseen(),
        ]),
        script("is the second available", [
            ask("thrillers", want().groups(&["Thriller"])),
            ask("the second one, is it available?", same()).about(SECOND, Availability),
        ]),
        script("is the first in stock", [
            ask("something like Toy Story", want().like("Toy Story (1995)")),
            ask("is the first one in stock?", same()).about(FIRST, Availability),
        ]),
        script("is the last available", [
            ask("sci-fi under $15", want().groups(&["Sci-Fi"]).under(15.0)),
            ask("the last one, is it available?", same()).about(LAST, Availability),
        ]),
        script("is the 2nd available", [
            ask("documentaries", want().groups(&["Documentary"])),
            ask("is the 2nd available?", same()).about(SECOND, Availability),
        ]),
        script("is that one available", [
            ask("adventure movies for kids", want().groups(&["Adventure"]).kids()),
            ask("is that one available?", same()).about(FIRST, Availability),
        ]),
        script("how much is the second", [
            ask("comedies", want().groups(&["Comedy"])),
            ask("how much is the second one?", same()).about(SECOND, Price),
        ]),
        script("what does it cost", [
            ask("musicals", want().groups(&["Musical"])),
            ask("what does it cost?", same()).about(FIRST, Price),
        ]),
        script("price of the first", [
            ask("horror", want().groups(&["Horror"])),
            ask("price of the first one", same()).about(FIRST, Price),
        ]),
        script("how much is the third", [
            ask("romantic movies", want().groups(&["Romance"])),
            ask("how much is the third one?", same()).about(THIRD, Price),
        ]),
        script("an exclusion persists until the group is named", [
            ask("no horror please", want().not(&["Horror"])),
            ask("comedies", previous().groups(&["Comedy"])),
            ask("horror movies", previous().groups(&["Horror"]).absent(&["excluded_groups"])),
        ]),
        script("a group wanted again", [
            ask("I don't want dramas", want().not(&["Drama"])),
            ask("dramas", previous().groups(&["Drama"]).absent(&["excluded_groups"])),
        ]),
        script("cheaper, then pricier", [
            ask("under $10", want().under(10.0)),
            ask("cheaper", previous().cheaper()),
            ask("pricier", previous().pricier()),
        ]),
        script("more expensive, then start over", [
            ask("crime movies", want().groups(&["Crime"])),
            ask("more expensive", previous().pricier()),
            ask("start over", want().no_constraints()),
        ]),
        script("years carry over", [
            ask("films from the 90s", want().years(1990, 1999)),
            ask("comedies", previous().groups(&["Comedy"])),
            ask("for kids", previous().kids()),
        ]),
        script("a year, then a price", [
            ask("movies from 1995", want().years(1995, 1995)),
            ask("under 5 dollars", previous().under(5.0)),
        ]),
        script("an audience, then prices", [
            ask("animated movies for kids", want().groups(&["Animation"]).kids()),
            ask("under 10 dollars", previous().under(10.0)),
            ask("not too expensive", previous().mid_priced()),
        ]),
        script("more like the second, then more", [
            ask("cartoons for kids", want().groups(&["Animation"]).kids()),
            ask("more like the second", previous().like_shown(SECOND)),
            ask("more", same()).unseen(),
        ]),
        script("similar, then cheaper", [
            ask("something like Finding Nemo", want().like("Finding Nemo (2003)")),
            ask("cheaper", previous().cheaper()),
        ]),
        script("an exclusion, then more", [
            ask("thrillers under $20", want().groups(&["Thriller"]).under(20.0)),
            ask("without horror", previous().not(&["Horror"])),
            ask("more", same()).unseen(),
        ]),
        script("an exclusion, a group, other ones", [
            ask("skip the comedies", want().not(&["Comedy"])),
            ask("dramas", previous().groups(&["Drama"])),
            ask("other ones", same()).unseen(),
        ]),
        script("a question about the second page", [
            ask("cartoons", want().groups(&["Animation"])),
            ask("show me more", same()).unseen(),
            ask("the first one, is it available?", same()).about(FIRST, Availability),
        ]),
        script("a greeting, then a genre, then more", [
            ask("hello", want().no_constraints()),
            ask("comedies", want().groups(&["Comedy"]).no_query()),
            ask("more", same()).unseen(),
        ]),
    ]
}

/// Clicked in the personalized session before asking for comedies.
const KIDS_FILMS_CLICKED: usize = 5;
const KIDS_FAN_SESSION: &str = "phrase-suite-kids-fan";
/// Items asked for in both answers, so that the lean shows.
const COMPARED_ITEMS: usize = 10;

/// "comedies" from a session full of kids' animated films: still comedies, with at
/// least as many Children comedies as the same message without the session.
pub fn personalized_comedies(server: &TestServer, catalog: &Catalog) -> Outcome {
    let case = "comedies, from a session full of kids' films";
    let mut outcome = Outcome {
        case: case.to_owned(),
        messages: 2,
        passed_messages: 0,
        failures: Vec::new(),
    };
    let clicks: Vec<_> = catalog
        .items
        .iter()
        .filter(|item| item.in_group("Children") && item.in_group("Animation"))
        .take(KIDS_FILMS_CLICKED)
        .map(|item| {
            event(
                "click",
                json!({"sid": KIDS_FAN_SESSION, "item_id": item.id, "click_type": "select"}),
            )
        })
        .collect();
    let (status, body) = server.admin_post(EVENTS, json!({ "events": clicks }));
    if status.as_u16() != 202 {
        let why = format!("the clicks were refused: HTTP {status} {body}");
        outcome.failures.push(Failure {
            turn: 0,
            message: "POST /v1/events".into(),
            why,
        });
        return outcome;
    }

    let comedies = want()
        .groups(&["Comedy"])
        .resolve(catalog, None)
        .expect("a plain expectation");
    let children = |answer: &serde_json::Value| {
        super::run::item_ids(answer)
            .unwrap_or_default()
            .iter()
            .filter(|id| catalog.get(id).is_some_and(|item| item.in_group("Children")))
            .count()
    };
    let plain = json!({"message": "comedies", "limit": COMPARED_ITEMS});
    let personal = json!({"message": "comedies", "limit": COMPARED_ITEMS, "session_id": KIDS_FAN_SESSION});
    // Per answer: its problems and how many Children comedies it has.
    let mut answers: Vec<(Vec<String>, Option<usize>)> = [plain, personal]
        .into_iter()
        .map(|body| match chat(server, body) {
            Ok(answer) => (matching_problems(catalog, &comedies, &answer), Some(children(&answer))),
            Err(error) => (vec![error], None),
        })
        .collect();
    if let [(_, Some(without)), (problems, Some(with))] = &mut answers[..] {
        if with < without {
            problems.push(format!(
                "{with} Children comedies with the session, {without} without it"
            ));
        }
    }
    for (index, (problems, _)) in answers.into_iter().enumerate() {
        if problems.is_empty() {
            outcome.passed_messages += 1;
        } else {
            outcome.failures.push(Failure {
                turn: index + 1,
                message: ["comedies", "comedies (with the session)"][index].into(),
                why: problems.join("; "),
            });
        }
    }
    outcome
}
