"""The ~40 kinds of memory the benchmark generates (:class:`Template`): phrasings of a statement,
the questions it answers, its memory type and the detail clauses a near-repeat may add.

Slots in braces (``{person}``, ``{date}`` ...) are filled by
:class:`memlane.eval.bench.generator.Generator` from :mod:`memlane.eval.bench.words` or from its
number rules. Changing a template changes the generator's output (bump ``GENERATOR_VERSION``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Template:
    """One kind of memory: phrasings of the statement, questions it answers, its type, and the
    slots it needs (filled by :func:`_fill`)."""

    name: str
    type: str
    texts: tuple[str, ...]
    questions: tuple[str, ...]
    #: Detail clauses appended by an ``extend`` near-repeat.
    details: tuple[str, ...] = ()


TEMPLATES: tuple[Template, ...] = (
    Template(
        "works_at",
        "fact",
        (
            "{person} works at {company} as a {role}.",
            "{person} is a {role} at {company}.",
            "{person} has a job as a {role} with {company}.",
        ),
        (
            "Where does {person} work these days?",
            "What is {person}'s job?",
            "Which company employs {person}?",
        ),
        (" on the {team} team", " since {year}", ", mostly remote"),
    ),
    Template(
        "joined",
        "event",
        (
            "{person} joined {company} in {month} {year} after {n} years at {company2}.",
            "In {month} {year} {person} left {company2} after {n} years and started at {company}.",
        ),
        ("When did {person} start at {company}?", "Where did {person} work before {company}?"),
        (" as a {role}",),
    ),
    Template(
        "reports_to",
        "fact",
        (
            "{person} reports to {person2} on the {team} team.",
            "{person2} is the manager of {person} in the {team} team.",
        ),
        ("Who is {person}'s manager?", "Which team is {person} on?"),
        (" at {company}",),
    ),
    Template(
        "email",
        "fact",
        ("{person}'s email address is {email}.", "You can reach {person} at {email}."),
        ("What's the email of {person}?", "How can I contact {person} by email?"),
        (" for work matters",),
    ),
    Template(
        "married",
        "fact",
        (
            "{person} is married to {first2} and they have {small} kids.",
            "{person} and their spouse {first2} have {small} children.",
        ),
        ("Does {person} have a family?", "Who is {person}'s partner?"),
        (" who go to school in {city}",),
    ),
    Template(
        "sibling",
        "fact",
        (
            "{person}'s sister {first2} is a {role} in {city}.",
            "{person} has a sister, {first2}, who works as a {role} in {city}.",
        ),
        ("What does {person}'s sister do for a living?", "Where does {person}'s sister live?"),
        (" and visits every {season}",),
    ),
    Template(
        "drink",
        "preference",
        (
            "{person} prefers {drink} over {drink2} in the morning.",
            "In the morning {person} drinks {drink}, never {drink2}.",
        ),
        ("What does {person} like to drink in the morning?", "Should I get {person} a coffee?"),
        (" with breakfast",),
    ),
    Template(
        "allergy",
        "fact",
        ("{person} is allergic to {allergen}.", "{person} has an allergy to {allergen}."),
        ("Does {person} have any allergies?", "Is there anything {person} must avoid?"),
        (" and carries an EpiPen", " since childhood"),
    ),
    Template(
        "cuisine",
        "preference",
        (
            "{person}'s favourite cuisine is {cuisine}, especially {dish}.",
            "{person} loves {cuisine} food, above all {dish}.",
        ),
        ("What kind of food does {person} enjoy?", "Where should I take {person} for dinner?"),
        (" from {restaurant}",),
    ),
    Template(
        "hobby",
        "preference",
        (
            "{person} likes to {hobby} on weekends.",
            "On weekends {person} usually goes off to {hobby}.",
        ),
        ("What are {person}'s hobbies?", "What does {person} do in their free time?"),
        (" with {first2}", " near {city}"),
    ),
    Template(
        "music",
        "preference",
        (
            "{person} listens to {genre} while working.",
            "When {person} works they put on {genre}.",
        ),
        ("What music does {person} listen to?", "What does {person} play while working?"),
        (" on noise-cancelling headphones",),
    ),
    Template(
        "review_time",
        "preference",
        (
            "{person} wants code reviews in the morning, never after {hour} pm.",
            "{person} asked for code reviews before noon and none after {hour} pm.",
        ),
        ("When should I send {person} a pull request?", "What time does {person} review code?"),
        (" on weekdays",),
    ),
    Template(
        "editor",
        "preference",
        (
            "{person} uses {editor} with a {theme} theme.",
            "{person}'s editor of choice is {editor}, set to a {theme} theme.",
        ),
        ("Which editor does {person} use?", "What is {person}'s development setup?"),
        (" and vim keybindings",),
    ),
    Template(
        "deadline",
        "fact",
        (
            "Project {code} is due on {date} and is led by {person}.",
            "{person} leads Project {code}, which must ship by {date}.",
        ),
        ("When is the {code} deadline?", "Who is in charge of Project {code}?"),
        (" for the {team} team",),
    ),
    Template(
        "stack",
        "fact",
        (
            "The {code} project runs on {tool} and {tool2}.",
            "Project {code} is built with {tool} plus {tool2}.",
        ),
        ("What stack does Project {code} use?", "Which technologies is {code} built on?"),
        (" in production",),
    ),
    Template(
        "budget",
        "fact",
        (
            "The budget for Project {code} is ${amount} for {year}.",
            "Project {code} has ${amount} to spend in {year}.",
        ),
        ("How much money does Project {code} have?", "What is the {code} budget this year?"),
        (" including contractors",),
    ),
    Template(
        "migration",
        "decision",
        (
            "The {code} team decided to migrate from {tool} to {tool2} by {month}.",
            "Decision: Project {code} moves off {tool} onto {tool2} before {month}.",
        ),
        ("What is Project {code} migrating to?", "Is {code} still using {tool}?"),
        (" to cut costs", " after the last outage"),
    ),
    Template(
        "outage",
        "event",
        (
            "Project {code} had an outage on {date} caused by {cause}.",
            "On {date} the {code} service went down because of {cause}.",
        ),
        ("What caused the {code} outage?", "When did Project {code} last go down?"),
        (" that lasted {small} hours",),
    ),
    Template(
        "owner",
        "fact",
        (
            "{person} owns the {component} of Project {code}.",
            "The {component} in Project {code} is maintained by {person}.",
        ),
        ("Who maintains the {component} of {code}?", "What does {person} own in Project {code}?"),
        (" and is on call for it",),
    ),
    Template(
        "trip",
        "event",
        (
            "{person} flew to {city} on {date} for the {event_kind}.",
            "On {date} {person} travelled to {city} to attend the {event_kind}.",
        ),
        ("When did {person} go to {city}?", "Why did {person} travel to {city}?"),
        (" with {person2}",),
    ),
    Template(
        "marathon",
        "event",
        (
            "{person} ran the {city} marathon in {small} hours {minutes} minutes in {year}.",
            "In {year} {person} finished the {city} marathon in {small}:{minutes}.",
        ),
        ("How fast did {person} run the marathon?", "Has {person} ever run a marathon?"),
        (", a personal best",),
    ),
    Template(
        "pet",
        "event",
        (
            "{person} adopted a {pet} named {pet_name} in {month} {year}.",
            "{person} got a {pet} called {pet_name} in {month} {year}.",
        ),
        ("What's the name of {person}'s pet?", "Does {person} have a dog or a cat?"),
        (" from a shelter in {city}",),
    ),
    Template(
        "birthday",
        "fact",
        ("{person}'s birthday is on {month} {day}.", "{person} was born on {month} {day}."),
        ("When is {person}'s birthday?", "What date should I remember for {person}?"),
        (" and they hate surprise parties",),
    ),
    Template(
        "met",
        "event",
        (
            "{person} and {person2} met at {place} in {city} in {year}.",
            "{person} first met {person2} at {place} in {city} back in {year}.",
        ),
        ("How do {person} and {person2} know each other?", "Where did {person} meet {person2}?"),
        (" through {first2}",),
    ),
    Template(
        "lives",
        "fact",
        (
            "{person} lives in {city} near {landmark}.",
            "{person}'s home is in {city}, close to {landmark}.",
        ),
        ("Where does {person} live?", "Which city is {person} based in?"),
        (" in a flat on {street}",),
    ),
    Template(
        "moved",
        "event",
        (
            "{person} moved from {city} to {city2} in {year}.",
            "In {year} {person} relocated from {city} to {city2}.",
        ),
        ("Where did {person} live before {city2}?", "When did {person} move to {city2}?"),
        (" for a new job",),
    ),
    Template(
        "office",
        "fact",
        (
            "The {company} office is at {number} {street} in {city}.",
            "{company} has its office at {number} {street}, {city}.",
        ),
        ("What is the address of the {company} office?", "Where is {company} located?"),
        (" on the {small}th floor",),
    ),
    Template(
        "lunch",
        "preference",
        (
            "{person} has lunch at {restaurant} on {street} every {weekday}.",
            "Every {weekday} {person} eats lunch at {restaurant} on {street}.",
        ),
        ("Where does {person} go for lunch?", "Which restaurant does {person} like?"),
        (" with the {team} team",),
    ),
    Template(
        "running",
        "fact",
        (
            "{person} runs {km} kilometres every week.",
            "Every week {person} runs about {km} kilometres.",
        ),
        ("How much does {person} run?", "Is {person} into running?"),
        (" along the river",),
    ),
    Template(
        "rent",
        "fact",
        (
            "{person}'s apartment in {city} costs {rent} euros a month.",
            "{person} pays {rent} euros monthly for a flat in {city}.",
        ),
        ("How much is {person}'s rent?", "What does {person} pay for housing?"),
        (" including utilities",),
    ),
    Template(
        "tests",
        "fact",
        (
            "The Project {code} test suite has {number} tests and takes {minutes} minutes.",
            "Project {code} runs {number} tests in about {minutes} minutes.",
        ),
        ("How long do the {code} tests take?", "How big is the {code} test suite?"),
        (" on CI",),
    ),
    Template(
        "coffee_count",
        "fact",
        (
            "{person} drinks {small} cups of coffee a day.",
            "{person} has {small} coffees every day.",
        ),
        ("How much coffee does {person} drink?", "Does {person} drink a lot of coffee?"),
        (" before noon",),
    ),
    Template(
        "learn",
        "goal",
        (
            "{person} wants to learn {language} by {future_year}.",
            "{person}'s goal is to speak {language} fluently by {future_year}.",
        ),
        ("Which language is {person} learning?", "What are {person}'s goals?"),
        (" for a move to {country}",),
    ),
    Template(
        "renew",
        "todo",
        (
            "Remind {person} to renew the {document} before {date}.",
            "{person} must renew the {document} by {date}.",
        ),
        ("What does {person} need to renew?", "Any deadlines coming up for {person}?"),
        (" online",),
    ),
    Template(
        "saving",
        "goal",
        (
            "{person} is saving for a trip to {country} in the {season} of {future_year}.",
            "{person} plans a trip to {country} in {season} {future_year} and is saving up.",
        ),
        ("Where does {person} want to travel?", "What is {person} saving money for?"),
        (" with {first2}",),
    ),
    Template(
        "identity",
        "identity",
        (
            "{person} is a {nationality} {role} who speaks {language} and {language2}.",
            "{person}, a {role} from a {nationality} family, speaks {language} and {language2}.",
        ),
        ("What languages does {person} speak?", "Where is {person} from?"),
        (" fluently",),
    ),
    Template(
        "mood",
        "observation",
        (
            "{person} seemed {feeling} during the {weekday} stand-up about Project {code}.",
            "At {weekday}'s stand-up {person} looked {feeling} about Project {code}.",
        ),
        ("How is {person} feeling about Project {code}?", "How did the {weekday} stand-up go?"),
        (" again",),
    ),
    Template(
        "meeting",
        "fact",
        (
            "The {team} team meets every {weekday} at {hour} am in room {room}.",
            "Every {weekday} at {hour} am the {team} team holds its meeting in room {room}.",
        ),
        ("When does the {team} team meet?", "Which room is the {team} meeting in?"),
        (" for about {minutes} minutes",),
    ),
    Template(
        "salary",
        "fact",
        (
            "{person} earns {salary} euros a year at {company}.",
            "{person}'s yearly salary at {company} is {salary} euros.",
        ),
        ("How much does {person} make?", "What is {person}'s salary?"),
        (" before tax",),
    ),
    Template(
        "car",
        "fact",
        (
            "{person} drives a {colour} {car} bought in {year}.",
            "{person} has a {colour} {car} from {year}.",
        ),
        ("What car does {person} drive?", "Does {person} own a car?"),
        (" with {km} thousand kilometres on it",),
    ),
)
