"""Benchmarks: a seeded generator of synthetic but realistic memories, and the three timed runs
behind ``memlane bench add|search|inject``.

The generator writes the kind of memories an assistant keeps about its user's world: people and
their jobs, relations, preferences and habits; projects with deadlines, budgets, stacks and
outages; trips, birthdays and other events; places; numbers and dates; goals, to-dos, decisions and
observations. About 40 templates with one to three phrasings each, filled from word lists of a few
hundred names, cities, companies, tools, foods and so on, so full-text search and the vectors see a
varied vocabulary (common words such as names and cities recur across thousands of memories, as in
a real store). A fraction of the stream is *near-repeats* of earlier memories so the write path's
deduplication does real work: exact repeats (``hash_exact``), the same text with other punctuation
(``auto_reject``), the same fact with a detail added (``replaced``), another phrasing of the same
fact (gray zone) and a changed number (``guard_keep``).

Queries come in two kinds: *hits* are questions about a stored fact, phrased differently from it
(``"Where does Maria Lopez work these days?"`` for ``"Maria Lopez works at Northwind Analytics as
a data engineer."``), and *misses* are questions on topics no memory is about.

Everything is a pure function of the seed: the same seed always gives the same texts, in the same
order, and the first ``n`` memories of a longer stream are the ``n`` memories of a shorter one.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import shutil
import string
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:
    from memlane.config import Settings

#: Bumped whenever the generator's output changes (it is part of the cache key of built stores).
GENERATOR_VERSION = 1
#: Owner of every benchmark memory.
OWNER = "bench"

T = TypeVar("T")
R = TypeVar("R")


def _split(text: str, sep: str | None = None) -> list[str]:
    """Items of a word list written as text: split on ``sep`` (whitespace by default); inner
    whitespace collapsed, ``_`` read as a space."""
    items = text.split(sep) if sep else text.split()
    return [" ".join(i.replace("_", " ").split()) for i in items if i.strip()]


# ----------------------------------------------------------------------------------- word lists
FIRST_NAMES = _split("""
Aaliyah Abdul Ada Adrian Aiko Alejandro Alice Amara Amir Ana Anders Andrea Anika Anton Aria Arjun
Astrid Ayesha Beatriz Ben Bianca Bogdan Bruno Camila Carlos Carmen Caroline Chen Chiara Chloe
Daniel Dara Dmitri Elena Elif Eliza Emeka Emil Emma Esther Fatima Felix Finn Freya Gabriel Grace
Hana Hannah Hassan Hugo Ibrahim Ingrid Isaac Isabel Ivan Jamal James Jana Javier Jin Joao Jonas
Julia Kai Karim Katarina Kenji Kofi Lars Laura Layla Leila Leo Liam Lina Lucas Lucia Luis Maya Malik
Marco Maria Mateo Mei Mia Mikhail Milan Mina Nadia Naomi Nia Nikolai Nina Noah Nora Olga Omar Oscar
Paolo Priya Quinn Rafael Rahul Ravi Rosa Ruth Sakura Samir Sara Sebastian Shira Simone Sofia Sven
Tariq Tessa Theo Tomas Uma Valentina Victor Wei Yara Yusuf Zainab Zoe
""")
LAST_NAMES = _split("""
Abbott Adeyemi Alvarez Andersen Bakker Banerjee Becker Bianchi Brennan Castillo Chen Costa Dahl
Delgado Dubois Eriksson Farouk Fischer Fontaine Garcia Gonzalez Gupta Haddad Hansen Hartmann
Hernandez Hoffmann Horvath Ibrahim Ito Jansen Jensen Kaur Kim Kowalski Kruger Larsen Laurent Lee
Lindqvist Lopez Mahmoud Marino Martin Mendes Meyer Moreau Morales Murphy Nakamura Nguyen Novak
Nowak Okafor Olsen Ortiz Park Patel Pereira Petrov Popescu Quispe Ramos Reyes Rossi Russo Saito
Santos Schmidt Schneider Silva Singh Sokolov Suzuki Tanaka Torres Ueda Vargas Varga Vogel Wagner
Walsh Weber Wojcik Yamamoto Yilmaz Zhang Zimmermann
""")
CITIES = _split("""
Amsterdam Athens Auckland Austin Baltimore Bangalore Barcelona Berlin Bilbao Bogota Bologna
Boston Brisbane Bristol Brussels Budapest Cairo Calgary Cape_Town Chicago Copenhagen Dakar
Denver Dublin Dubai Edinburgh Florence Frankfurt Geneva Glasgow Gothenburg Hamburg Helsinki
Hong_Kong Istanbul Jakarta Kyoto Lagos Leeds Lima Lisbon Ljubljana London Los_Angeles Lyon
Madrid Manchester Marseille Melbourne Mexico_City Miami Milan Montreal Mumbai Munich Nairobi
Naples Nashville New_York Oslo Osaka Ottawa Paris Perth Philadelphia Porto Prague Quebec Reykjavik
Riga Rome Rotterdam San_Diego San_Francisco Santiago Sao_Paulo Seattle Seoul Seville Shanghai
Singapore Sofia Stockholm Sydney Taipei Tallinn Tokyo Toronto Turin Utrecht Valencia Vancouver
Vienna Vilnius Warsaw Wellington Zagreb Zurich
""")
COUNTRIES = _split("""
Argentina Australia Austria Brazil Canada Chile Colombia Croatia Denmark Egypt Estonia Finland
France Georgia Germany Ghana Greece Iceland India Indonesia Ireland Italy Japan Jordan Kenya
Latvia Malaysia Mexico Morocco Nepal Netherlands Norway Peru Poland Portugal Romania Scotland
Senegal Slovenia Spain Sweden Switzerland Taiwan Thailand Turkey Uruguay Vietnam
""")
COMPANY_A = _split("""
Acme Apex Beacon Blue_Harbor Bright Cobalt Copper Crescent Delta Ember Evergreen Falcon Granite
Harbor Helix Horizon Iron Juniper Keystone Lantern Lumen Maple Meridian Nimbus Northwind Oak
Orbit Pioneer Quartz Redwood Riverside Sable Silverline Solstice Summit Tidal Vertex Willow
""")
COMPANY_B = _split("""
Analytics Bank Biotech Capital Consulting Dynamics Energy Foods Games Health Insurance Labs
Logistics Media Motors Networks Pharma Robotics Software Studios Systems Telecom Ventures
""")
ROLES = _split(
    """
accountant|architect|backend_engineer|barista|civil_engineer|data_analyst|data_engineer|data_scientist|
dentist|designer|devops_engineer|economist|electrician|engineering_manager|financial_analyst|
frontend_developer|graphic_designer|high_school_teacher|journalist|lawyer|librarian|machine_learning_engineer|
marketing_manager|mechanical_engineer|nurse|pharmacist|physiotherapist|pilot|product_manager|
project_manager|researcher|sales_director|security_engineer|site_reliability_engineer|
software_engineer|sound_engineer|translator|UX_researcher|veterinarian|product_designer
""",
    "|",
)
TEAMS = _split("""
billing checkout data_platform design_systems growth identity infrastructure mobile payments
platform recommendations search security support_tooling analytics onboarding
""")
CODE_ADJ = _split("""
Amber Arctic Azure Bold Brave Cedar Coral Crimson Dusty Emerald Golden Granite Hidden Indigo
Ivory Jade Lunar Misty Obsidian Onyx Pale Quiet Rapid Rusty Scarlet Silent Silver Solar Swift
Velvet Violet Wild
""")
CODE_NOUN = _split("""
Badger Comet Condor Coyote Falcon Fjord Gecko Glacier Harbor Heron Ibis Jaguar Kestrel Lynx
Magpie Marmot Meadow Mesa Otter Panther Pelican Phoenix Prairie Raven Sparrow Summit Tundra
Walrus Wolf Yak
""")
TOOLS = _split(
    """
PostgreSQL|MySQL|SQLite|Redis|Kafka|RabbitMQ|Elasticsearch|Kubernetes|Docker|Terraform|Ansible|
React|Vue|Svelte|Angular|Django|Flask|FastAPI|Rails|Spring Boot|Node.js|Go|Rust|Kotlin|Swift|
TypeScript|Python|Java|Scala|Elixir|GraphQL|gRPC|Airflow|Spark|Snowflake|BigQuery|dbt|Grafana|
Prometheus|Datadog|Sentry|Jenkins|GitHub Actions|GitLab CI|AWS Lambda|DynamoDB|S3|Cloudflare|
Nginx|Envoy|Vault|Celery|pandas|PyTorch|Figma|Jira|Linear|Notion
""",
    "|",
)
COMPONENTS = _split(
    """
API gateway|auth service|billing worker|search indexer|notification service|data pipeline|
mobile backend|admin dashboard|payment gateway|recommendation engine|feature store|CI pipeline|
reporting service|image resizer|rate limiter|export job
""",
    "|",
)
OUTAGE_CAUSES = _split(
    """
an expired TLS certificate|a full disk on the primary database|a bad config push|a memory leak in
the worker pool|a DNS misconfiguration|a runaway cron job|a schema migration that locked a table|
a third-party API rate limit|a network partition between regions|a cache stampede after a deploy|
a missing database index|an out-of-memory crash
""",
    "|",
)
DRINKS = _split(
    """
black coffee|green tea|oat milk lattes|espresso|chai|matcha|sparkling water|hot chocolate|
rooibos tea|iced americanos|earl grey|cold brew|mint tea|flat whites|kombucha|orange juice
""",
    "|",
)
CUISINES = [
    ("Japanese", "ramen"),
    ("Japanese", "sushi"),
    ("Italian", "risotto"),
    ("Italian", "fresh pasta"),
    ("Mexican", "tacos al pastor"),
    ("Indian", "dal makhani"),
    ("Thai", "green curry"),
    ("Ethiopian", "injera with lentils"),
    ("Lebanese", "falafel"),
    ("Vietnamese", "pho"),
    ("Korean", "bibimbap"),
    ("Greek", "moussaka"),
    ("Peruvian", "ceviche"),
    ("Turkish", "lahmacun"),
    ("Spanish", "paella"),
    ("French", "ratatouille"),
    ("Georgian", "khachapuri"),
    ("Moroccan", "lamb tagine"),
    ("Chinese", "dumplings"),
    ("Brazilian", "feijoada"),
]
ALLERGENS = _split(
    """
peanuts|shellfish|gluten|lactose|tree nuts|sesame|eggs|soy|cat hair|pollen|penicillin|bee stings
""",
    "|",
)
HOBBIES = _split(
    """
go bouldering|bake sourdough bread|play chess online|go trail running|paint watercolours|
restore old bikes|brew beer at home|go birdwatching|play pickleball|do pottery|sail|
build mechanical keyboards|go fly fishing|play the cello|grow tomatoes|do crossword puzzles|
go kayaking|knit sweaters|play board games|go camping|practice calligraphy|dance salsa|
collect vinyl records|go scuba diving|write short stories|practice yoga|ski|surf|
fly drones|play tennis
""",
    "|",
)
GENRES = _split(
    """
jazz|lo-fi hip hop|classical piano|techno|bossa nova|film soundtracks|indie folk|
heavy metal|ambient music|80s synth-pop|blues|podcasts about history
""",
    "|",
)
EDITORS = ["VS Code", "Neovim", "Emacs", "PyCharm", "IntelliJ", "Sublime Text", "Zed", "Helix"]
THEMES = ["dark", "light", "solarized", "high-contrast", "gruvbox", "monokai"]
PETS = _split(
    """
beagle|border collie|tabby cat|golden retriever|parrot|rabbit|corgi|siamese cat|dachshund|
tortoise|greyhound|maine coon|hamster|labrador|bearded dragon|husky
""",
    "|",
)
PET_NAMES = _split("""
Biscuit Pepper Luna Milo Ziggy Mochi Nala Otis Pickles Rocky Olive Waffles Juniper Tofu Pixel
Hazel Bruno Clementine Noodle Sherlock
""")
LANGUAGES = _split("""
Spanish French German Italian Portuguese Japanese Korean Mandarin Arabic Hindi Turkish Dutch
Swedish Polish Greek Swahili Russian Hebrew
""")
NATIONALITIES = _split("""
Argentinian Australian Brazilian Canadian Chilean Danish Dutch Egyptian Finnish French German
Ghanaian Greek Indian Irish Italian Japanese Kenyan Korean Mexican Nigerian Norwegian Polish
Portuguese Spanish Swedish Turkish
""")
MONTHS = _split("""
January February March April May June July August September October November December
""")
WEEKDAYS = _split("Monday Tuesday Wednesday Thursday Friday Saturday Sunday")
SEASONS = ["spring", "summer", "autumn", "winter"]
STREETS = _split(
    """
Elm|Harbour|Linden|Market|Mill|Oak|Orchard|Park|Queen|River|Station|Union|Victoria|Willow|
Church|High|King|Canal|Chestnut|Bridge
""",
    "|",
)
STREET_KINDS = ["Street", "Road", "Avenue", "Lane", "Square"]
PLACES = _split(
    """
a climbing gym|a jazz bar|a friend's wedding|a hackathon|a conference in Lisbon|a cooking class|
a book club|university|a coworking space|a music festival|a running club|a language exchange
""",
    "|",
)
EVENT_KINDS = _split(
    """
quarterly planning offsite|customer workshop|tech conference|team retreat|job interview|
product launch|board meeting|sales kickoff|wedding|family reunion
""",
    "|",
)
DOCUMENTS = [
    "passport",
    "driving licence",
    "gym membership",
    "car insurance",
    "domain name",
    "lease",
    "work visa",
    "SSL certificate",
    "library card",
]
RESTAURANT_A = _split(
    """
Blue|Golden|Little|Old|Green|Red|Happy|Lucky|Wild|Hidden|Corner|Tiny
""",
    "|",
)
RESTAURANT_B = _split(
    """
Lantern|Fig|Spoon|Olive|Dragon|Pepper|Table|Kitchen|Noodle|Garden|Bistro|Oven
""",
    "|",
)
LANDMARKS = _split(
    """
the central station|the old harbour|the botanical garden|the university campus|the river|
the cathedral|the main square|the football stadium|the city park|the tech park
""",
    "|",
)
FEELINGS = _split(
    """
stressed|frustrated|excited|tired|unusually quiet|optimistic|confused|relieved|impatient|
enthusiastic
""",
    "|",
)
DOMAINS = ["gmail.com", "proton.me", "outlook.com", "fastmail.com", "icloud.com"]

# Misses: questions on topics no memory is about.
MISS_TOPICS = _split(
    """
descale an espresso machine|repot a fiddle leaf fig|fix a leaking kitchen faucet|convert
Celsius to Fahrenheit|explain the offside rule in football|write a haiku about autumn rain|
remove red wine stains from a carpet|tune a ukulele|explain how photosynthesis works|
calculate compound interest|start a compost heap|sharpen a kitchen knife|understand black holes|
train for a first triathlon|choose a telescope for stargazing|make a paper crane|
explain quantum entanglement simply|get rid of fruit flies|fold a fitted sheet|
pick a ripe avocado|explain the Pythagorean theorem|bleed a radiator|care for a bonsai tree|
memorise a deck of cards|identify edible mushrooms|explain inflation to a child|
patch a bicycle inner tube|build a birdhouse|write a limerick about penguins|
season a cast iron pan|explain the French Revolution|get better sleep on a long flight|
unclog a shower drain|solve a Rubik's cube|explain how vaccines work|set up a saltwater aquarium|
carve a pumpkin|explain plate tectonics|whistle with two fingers|juggle three balls|
learn to skateboard as an adult|explain the rules of cricket|make kimchi at home|
recognise constellations in winter|write a sonnet|train a parrot to talk|restore a wooden table|
explain supply and demand|knit a scarf|make a sundial|explain the water cycle|
choose hiking boots|brew kombucha|count calories in a smoothie|negotiate a used car price|
calm a crying baby|paint a room without streaks|keep basil alive indoors|explain DNA replication
""",
    "|",
)
MISS_FORMS = [
    "How do I {t}?",
    "What's the easiest way to {t}?",
    "Can you tell me how to {t}?",
    "Any tips to {t}?",
    "I need to {t}, where do I start?",
    "Is it hard to {t}?",
    "What do I need to {t}?",
    "Could you explain how to {t} step by step?",
]
MISS_TAILS = [
    "",
    " I have never done it before.",
    " Keep it short.",
    " Asking for a friend.",
    " It's for a school project.",
    " I only have an hour.",
    " Without special tools, ideally.",
    " On a small budget.",
]
HIT_PREFIXES = [
    "",
    "Quick question: ",
    "Remind me, ",
    "Do you remember: ",
    "Hey, ",
    "One more thing: ",
    "Sorry if I asked already, ",
    "Before the meeting: ",
]
CHAT_OPENERS = [
    "Morning! ",
    "",
    "Ok so ",
    "Back to work. ",
    "Another thing. ",
    "",
    "Hmm, ",
    "",
]


# ----------------------------------------------------------------------------------- templates
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
COLOURS = ["red", "blue", "grey", "black", "white", "green", "silver", "yellow", "dark blue"]
CARS = [
    "Volvo estate",
    "Toyota Prius",
    "Tesla Model 3",
    "Fiat 500",
    "VW Golf",
    "Subaru Outback",
    "Renault Clio",
    "Mazda MX-5",
    "Skoda Octavia",
    "Honda Civic",
]

#: Slots drawn from a pool (slot -> name of the pool); ``people``, ``companies`` and
#: ``projects`` are the generator's own.
_CHOICES: dict[str, str] = {
    "person": "people",
    "first2": "FIRST_NAMES",
    "company": "companies",
    "role": "ROLES",
    "team": "TEAMS",
    "code": "projects",
    "tool": "TOOLS",
    "component": "COMPONENTS",
    "cause": "OUTAGE_CAUSES",
    "drink": "DRINKS",
    "allergen": "ALLERGENS",
    "hobby": "HOBBIES",
    "genre": "GENRES",
    "editor": "EDITORS",
    "theme": "THEMES",
    "pet": "PETS",
    "pet_name": "PET_NAMES",
    "language": "LANGUAGES",
    "nationality": "NATIONALITIES",
    "city": "CITIES",
    "country": "COUNTRIES",
    "landmark": "LANDMARKS",
    "street": "STREET_NAMES",
    "restaurant": "RESTAURANTS",
    "place": "PLACES",
    "event_kind": "EVENT_KINDS",
    "document": "DOCUMENTS",
    "feeling": "FEELINGS",
    "month": "MONTHS",
    "weekday": "WEEKDAYS",
    "season": "SEASONS",
    "colour": "COLOURS",
    "car": "CARS",
}
#: Second slot of a pair (never equal to the first): slot -> (first slot, pool).
_PAIRED: dict[str, tuple[str, str]] = {
    "person2": ("person", "people"),
    "company2": ("company", "companies"),
    "tool2": ("tool", "TOOLS"),
    "drink2": ("drink", "DRINKS"),
    "language2": ("language", "LANGUAGES"),
    "city2": ("city", "CITIES"),
}
_NUMBERS: dict[str, Callable[[random.Random], str]] = {
    "day": lambda r: str(r.randint(1, 28)),
    "year": lambda r: str(r.randint(2009, 2025)),
    "future_year": lambda r: str(r.randint(2026, 2030)),
    "date": lambda r: f"{r.choice(MONTHS)} {r.randint(1, 28)}, {r.randint(2023, 2027)}",
    "n": lambda r: str(r.randint(2, 12)),
    "small": lambda r: str(r.randint(2, 6)),
    "hour": lambda r: str(r.randint(7, 11)),
    "minutes": lambda r: str(r.randint(10, 59)),
    "km": lambda r: str(r.randint(10, 80)),
    "number": lambda r: str(r.randint(12, 4800)),
    "room": lambda r: f"{r.randint(1, 9)}.{r.randint(1, 40):02d}",
    "amount": lambda r: f"{r.randint(20, 950) * 1000:,}",
    "rent": lambda r: f"{r.randint(45, 320) * 10:,}",
    "salary": lambda r: f"{r.randint(35, 180) * 1000:,}",
}
STREET_NAMES = [f"{a} {b}" for a in STREETS for b in STREET_KINDS]
RESTAURANTS = [f"the {a} {b}" for a in RESTAURANT_A for b in RESTAURANT_B]
#: The order slots are drawn in (a pair's first slot before its second, person before email).
_SLOT_ORDER: tuple[str, ...] = (
    *_CHOICES,
    *_PAIRED,
    "cuisine",
    "dish",
    "email",
    *_NUMBERS,
)


def _template_fields(template: Template) -> tuple[str, ...]:
    names: set[str] = set()
    for text in (*template.texts, *template.questions, *template.details):
        names.update(f for _, f, _, _ in string.Formatter().parse(text) if f)
    unknown = names - set(_SLOT_ORDER)
    if unknown:  # pragma: no cover - a typo in a template
        raise ValueError(f"template {template.name!r}: unknown slots {sorted(unknown)}")
    if "email" in names:
        names.add("person")
    return tuple(f for f in _SLOT_ORDER if f in names)


_FIELDS: dict[str, tuple[str, ...]] = {t.name: _template_fields(t) for t in TEMPLATES}

_NUMBER = re.compile(r"\d+")


@dataclass(frozen=True, slots=True)
class SyntheticMemory:
    """One generated memory: its text and type, the question it answers, and how it came about
    (``kind``: ``new`` or a near-repeat ``repeat``/``punctuation``/``extend``/``reword``/
    ``number``; ``base`` is the stream index of the memory it repeats, else its own index)."""

    content: str
    type: str
    question: str
    kind: str
    base: int


@dataclass(slots=True)
class _Fact:
    template: Template
    slots: dict[str, str]
    phrasing: int


class Generator:
    """Seeded stream of :class:`SyntheticMemory` and of queries about it.

    ``near_repeats`` is the fraction of the stream that repeats an earlier memory (see the module
    docstring); the rest are new facts.
    """

    def __init__(self, seed: int = 0, *, near_repeats: float = 0.1, people: int = 3000) -> None:
        self.seed = seed
        self.near_repeats = near_repeats
        rng = random.Random(f"memlane-bench:{seed}:people")
        # A fixed cast of people: each recurs across many memories, as in a real store.
        seen: set[str] = set()
        self.people: list[str] = []
        while len(self.people) < people:
            name = f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}"
            if name not in seen:
                seen.add(name)
                self.people.append(name)
        self.projects = [f"{a} {n}" for a in CODE_ADJ for n in CODE_NOUN]
        rng.shuffle(self.projects)
        self.projects = self.projects[:600]
        self.companies = [f"{a} {b}" for a in COMPANY_A for b in COMPANY_B]
        rng.shuffle(self.companies)
        self.companies = self.companies[:400]
        self._facts: list[_Fact] = []
        self._fact_index: list[int] = []  # stream index of each entry of _facts
        self._stream: list[SyntheticMemory] = []
        self._rng = random.Random(f"memlane-bench:{seed}:stream")

    # ------------------------------------------------------------------------- memories
    def memories(self, n: int, start: int = 0) -> list[SyntheticMemory]:
        """Memories ``start .. start+n-1`` of the stream (always the same for a seed)."""
        while len(self._stream) < start + n:
            self._stream.append(self._next(len(self._stream)))
        return self._stream[start : start + n]

    def _next(self, index: int) -> SyntheticMemory:
        rng = self._rng
        if self._facts and rng.random() < self.near_repeats:
            return self._near_repeat(index, rng)
        template = TEMPLATES[rng.randrange(len(TEMPLATES))]
        slots = self._fill(rng, _FIELDS[template.name])
        phrasing = rng.randrange(len(template.texts))
        self._facts.append(_Fact(template, slots, phrasing))
        text = template.texts[phrasing].format(**slots)
        question = rng.choice(template.questions).format(**slots)
        self._fact_index.append(index)
        return SyntheticMemory(text, template.type, question, "new", index)

    def _near_repeat(self, index: int, rng: random.Random) -> SyntheticMemory:
        k = rng.randrange(len(self._facts))
        fact = self._facts[k]
        base = self._fact_index[k]
        template = fact.template
        text = template.texts[fact.phrasing].format(**fact.slots)
        question = rng.choice(template.questions).format(**fact.slots)
        roll = rng.random()
        if roll < 0.25:
            kind = "repeat"  # the exact text again (another session said it again)
        elif roll < 0.45:
            kind = "punctuation"  # same words, other punctuation: another hash, same meaning
            text = text.rstrip(".") + rng.choice(["", "!", " !", "...", " :)"])
        elif roll < 0.70 and template.details:
            kind = "extend"
            detail = rng.choice(template.details).format(**fact.slots)
            text = text.rstrip(".") + detail + "."
        elif roll < 0.85 and len(template.texts) > 1:
            kind = "reword"
            other = [i for i in range(len(template.texts)) if i != fact.phrasing]
            text = template.texts[rng.choice(other)].format(**fact.slots)
        else:
            kind = "number"
            numbers = _NUMBER.findall(text)
            if numbers:
                old = rng.choice(numbers)
                new = str(int(old) + rng.randint(1, 9))
                text = text.replace(old, new, 1)
            else:
                kind = "repeat"
        return SyntheticMemory(text, template.type, question, kind, base)

    def _fill(self, rng: random.Random, fields: Sequence[str]) -> dict[str, str]:
        """Draw a value for each of ``fields`` (in :data:`_SLOT_ORDER`, so pairs stay distinct
        and ``email`` follows ``person``)."""
        out: dict[str, str] = {}
        for name in fields:
            if name in out:
                continue
            if name in _PAIRED:
                first, pool_name = _PAIRED[name]
                pool = self._pool(pool_name)
                value = rng.choice(pool)
                while value == out.get(first):
                    value = rng.choice(pool)
                out[name] = value
            elif name in ("cuisine", "dish"):
                out["cuisine"], out["dish"] = rng.choice(CUISINES)
            elif name == "email":
                first, last = out["person"].split(" ", 1)
                out[name] = (
                    f"{first.lower()}.{last.lower()}{rng.randint(1, 99)}@{rng.choice(DOMAINS)}"
                )
            elif name in _CHOICES:
                out[name] = rng.choice(self._pool(_CHOICES[name]))
            else:
                out[name] = _NUMBERS[name](rng)
        return out

    def _pool(self, name: str) -> Sequence[str]:
        if name == "people":
            return self.people
        if name == "companies":
            return self.companies
        if name == "projects":
            return self.projects
        pool: Sequence[str] = globals()[name]
        return pool

    # ------------------------------------------------------------------------- queries
    def queries(
        self, n: int, stored: int, *, hit_ratio: float = 0.7, salt: str = "queries"
    ) -> list[BenchQuery]:
        """``n`` distinct queries about the first ``stored`` memories: about ``hit_ratio`` of them
        questions about a stored fact, the rest on unrelated topics. ``salt`` draws another set."""
        memories = self.memories(stored)
        rng = random.Random(f"memlane-bench:{self.seed}:{salt}")
        out: list[BenchQuery] = []
        seen: set[str] = set()
        attempts = 0
        while len(out) < n:
            attempts += 1
            if attempts > n * 50:
                raise RuntimeError("could not draw enough distinct queries")
            if rng.random() < hit_ratio:
                mem = memories[rng.randrange(len(memories))]
                text = _join(rng.choice(HIT_PREFIXES), mem.question)
                query = BenchQuery(text, hit=True, target=mem.content)
            else:
                form = rng.choice(MISS_FORMS).format(t=rng.choice(MISS_TOPICS))
                query = BenchQuery(form + rng.choice(MISS_TAILS), hit=False, target=None)
            if query.text in seen:
                continue
            seen.add(query.text)
            out.append(query)
        return out

    def conversation(
        self, turns: int, stored: int, *, sessions: int = 8, salt: str = "inject"
    ) -> list[Turn]:
        """``turns`` user messages spread round-robin over ``sessions`` sessions, each with the
        session's two previous messages as ``recent``."""
        rng = random.Random(f"memlane-bench:{self.seed}:{salt}:chat")
        queries = self.queries(turns, stored, salt=salt)
        history: dict[int, list[str]] = {}
        out: list[Turn] = []
        for i, q in enumerate(queries):
            s = i % sessions
            past = history.setdefault(s, [])
            text = _join(rng.choice(CHAT_OPENERS), q.text)
            out.append(Turn(s, text, tuple(past[-2:]), q.hit))
            past.append(text)
        return out


def _join(prefix: str, text: str) -> str:
    """``prefix + text``, with the text's first letter lower-cased after a comma or a word."""
    if prefix and not prefix.rstrip().endswith((".", "!", "?", ":")) and text[1:2].islower():
        text = text[:1].lower() + text[1:]
    return prefix + text


@dataclass(frozen=True, slots=True)
class BenchQuery:
    text: str
    hit: bool
    #: The stored text the question is about (hits only).
    target: str | None


@dataclass(frozen=True, slots=True)
class Turn:
    session: int
    text: str
    recent: tuple[str, ...]
    hit: bool


# ----------------------------------------------------------------------------------- timing
class TimedEmbedder:
    """Wraps an embedder and adds up the seconds spent in it (for the embed share)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.seconds = 0.0

    @property
    def name(self) -> str:
        return str(self.inner.name)

    @property
    def dimension(self) -> int:
        return int(self.inner.dimension)

    def embed_batch(self, texts: Sequence[str]) -> NDArray[np.floating]:
        started = time.perf_counter()
        try:
            return self.inner.embed_batch(texts)  # type: ignore[no-any-return]
        finally:
            self.seconds += time.perf_counter() - started


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (linear interpolation), 0.0 for no values."""
    if not values:
        return 0.0
    return float(np.percentile(np.asarray(values, dtype=np.float64), q))


def latency_summary(ms: Sequence[float], prefix: str = "") -> dict[str, float]:
    return {
        f"{prefix}p50_ms": round(percentile(ms, 50), 3),
        f"{prefix}p95_ms": round(percentile(ms, 95), 3),
        f"{prefix}mean_ms": round(float(np.mean(ms)) if ms else 0.0, 3),
        f"{prefix}max_ms": round(max(ms) if ms else 0.0, 3),
    }


@dataclass(slots=True)
class _Timed(Generic[R]):
    """Calls timed one by one: the milliseconds and the result of each, the seconds the untimed
    warm-up took, and the milliseconds spent embedding during the timed calls."""

    ms: list[float]
    results: list[R]
    warmup_seconds: float
    embed_ms: float

    @property
    def embed_share(self) -> float:
        total = sum(self.ms)
        return round(self.embed_ms / total, 4) if total else 0.0


def _time_calls(
    timer: TimedEmbedder, warmup: Sequence[T], timed: Sequence[T], call: Callable[[T], R]
) -> _Timed[R]:
    """``call`` on each of ``warmup`` with no clock, then on each of ``timed``, one clock each."""
    started = time.perf_counter()
    for item in warmup:
        call(item)
    warmup_seconds = time.perf_counter() - started
    ms: list[float] = []
    results: list[R] = []
    embed_before = timer.seconds
    for item in timed:
        started = time.perf_counter()
        result = call(item)
        ms.append((time.perf_counter() - started) * 1000.0)
        results.append(result)
    return _Timed(ms, results, warmup_seconds, (timer.seconds - embed_before) * 1000.0)


# ----------------------------------------------------------------------------------- building
@dataclass(slots=True)
class BuildStats:
    memories: int = 0
    seconds: float = 0.0
    embed_seconds: float = 0.0
    decisions: Counter[str] = field(default_factory=Counter)
    stored: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "memories": self.memories,
            "stored": self.stored,
            "build_seconds": round(self.seconds, 3),
            "embed_seconds": round(self.embed_seconds, 3),
            "decisions": dict(sorted(self.decisions.items())),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BuildStats:
        return cls(
            memories=int(data["memories"]),
            seconds=float(data["build_seconds"]),
            embed_seconds=float(data.get("embed_seconds", 0.0)),
            decisions=Counter({str(k): int(v) for k, v in data.get("decisions", {}).items()}),
            stored=int(data.get("stored", 0)),
        )


def build(
    engine: Any,
    generator: Generator,
    n: int,
    *,
    batch: int = 256,
    timer: TimedEmbedder,
    progress: Callable[[int], None] | None = None,
) -> BuildStats:
    """Offer the first ``n`` memories of ``generator`` to ``engine.add_many`` in batches of
    ``batch`` (dedup on, as configured); ``timer`` is the engine's embedder. ``progress`` is
    called with the count done so far."""
    from memlane.engine import MemoryInput

    stats = BuildStats(memories=n)
    engine.embed(["warm-up: loads the model", "before the clock starts"])  # not timed
    engine.embed(["a single text"])
    embed_before = timer.seconds
    started = time.perf_counter()
    done = 0
    for start in range(0, n, batch):
        chunk = generator.memories(min(batch, n - start), start)
        items = [MemoryInput(m.content, m.type, OWNER, source="bench") for m in chunk]
        for result in engine.add_many(items):
            stats.decisions[result.decision.value] += 1
        done += len(chunk)
        if progress is not None:
            progress(done)
    stats.seconds = time.perf_counter() - started
    stats.embed_seconds = timer.seconds - embed_before
    stats.stored = int(engine.count(OWNER))
    return stats


def timed_embedder(settings: Settings) -> TimedEmbedder:
    """The embedder ``settings`` select, wrapped in a :class:`TimedEmbedder` (its model loads on
    first use, not here)."""
    from memlane.embeddings import make_embedder

    emb = settings.embedding
    return TimedEmbedder(make_embedder(emb.provider, model=emb.model, dimension=emb.dimension))


def open_engine(home: Path, timer: TimedEmbedder | None = None) -> tuple[Any, TimedEmbedder]:
    """Open an engine on ``home`` embedding with ``timer``, else with the embedder its settings
    select wrapped in a :class:`TimedEmbedder`."""
    from memlane.config import Settings
    from memlane.engine import MemoryEngine

    settings = Settings.load(home)
    timer = timer if timer is not None else timed_embedder(settings)
    return MemoryEngine.open(home, settings, embedder=timer), timer


def default_cache_dir() -> Path:
    """``$MEMLANE_BENCH_CACHE``, else ``$XDG_CACHE_HOME/memlane/bench``, else
    ``~/.cache/memlane/bench``."""
    explicit = os.environ.get("MEMLANE_BENCH_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or "~/.cache"
    return Path(base).expanduser() / "memlane" / "bench"


MARKER = "bench.json"


def store_key(embedder_name: str, n: int, seed: int) -> str:
    safe = re.sub(r"[^A-Za-z0-9.-]+", "_", embedder_name)
    return f"{safe}-n{n}-seed{seed}-g{GENERATOR_VERSION}"


@dataclass(slots=True)
class PreparedStore:
    """A home holding a bench store, how it was built, and the embedder to time runs with (the
    one that built it, its model already loaded then)."""

    home: Path
    build: BuildStats
    reused: bool
    embedder: TimedEmbedder


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    import fcntl  # here, not at the top: memlane.replay imports this module for its percentiles

    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def prepare_store(
    n: int,
    seed: int,
    *,
    home: Path | None,
    cache_dir: Path | None,
    rebuild: bool = False,
    batch: int = 256,
    progress: Callable[[int], None] | None = None,
) -> PreparedStore:
    """A home holding the bench store of ``n`` memories for ``seed``: reused when already built
    (a ``bench.json`` marker with the same key), else built. With ``home`` the store lives there;
    otherwise under ``cache_dir`` (default :func:`default_cache_dir`), one folder per key.

    Raises:
        InvalidArgument: ``home`` holds a store that is not this benchmark's.
    """
    from memlane.config import CONFIG_FILENAME, Settings
    from memlane.errors import InvalidArgument

    in_cache = home is None
    if home is None:
        # The cache's stores use the default settings (and MEMLANE_* variables), never a home's.
        timer = timed_embedder(Settings.load(Path(tempfile.gettempdir()) / "memlane-bench-none"))
        home = (cache_dir or default_cache_dir()) / store_key(timer.name, n, seed)
    else:
        timer = timed_embedder(Settings.load(home))
    key = store_key(timer.name, n, seed)
    marker = home / MARKER
    lock = home / ".bench.lock"
    keep = (lock.name, CONFIG_FILENAME)
    if (
        not in_cache
        and home.is_dir()
        and not marker.is_file()
        and any(child.name not in keep for child in home.iterdir())
    ):
        raise InvalidArgument(
            f"{home} is not empty and holds no bench store; give an empty or new folder as --home"
        )
    home.mkdir(parents=True, exist_ok=True)
    with _locked(lock):
        if marker.is_file() and not rebuild:
            data = json.loads(marker.read_text())
            if data.get("key") != key:
                raise InvalidArgument(
                    f"{home} holds the bench store {data.get('key')!r}, not {key!r}: "
                    "use another --home, or --rebuild to replace it"
                )
            return PreparedStore(home, BuildStats.from_dict(data["build"]), True, timer)
        for child in home.iterdir():  # our own store (stale, or --rebuild): start afresh
            if child.name in keep:
                continue
            if child.is_dir():
                shutil.rmtree(child)
            else:
                child.unlink()
        engine, _ = open_engine(home, timer)
        with engine:
            stats = build(engine, Generator(seed), n, batch=batch, timer=timer, progress=progress)
        tmp = marker.with_suffix(".tmp")
        tmp.write_text(json.dumps({"key": key, "seed": seed, "build": stats.to_dict()}, indent=2))
        os.replace(tmp, marker)
        return PreparedStore(home, stats, False, timer)


# ----------------------------------------------------------------------------------- runs
def run_add(
    n: int,
    *,
    home: Path,
    seed: int = 0,
    batch: int = 256,
    singles: int = 200,
    warmup: int = 5,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Build a store of ``n`` memories in ``home`` (batched, dedup on), then time ``singles``
    single adds of the next memories of the stream (after ``warmup`` untimed ones)."""
    generator = Generator(seed)
    engine, timer = open_engine(home)
    with engine:
        stats = build(engine, generator, n, batch=batch, timer=timer, progress=progress)
        extra = generator.memories(warmup + singles, n)
        run = _time_calls(
            timer,
            extra[:warmup],
            extra[warmup:],
            lambda m: engine.add(m.content, type=m.type, owner=OWNER, source="bench"),
        )
        stored = engine.count(OWNER)
    single_decisions = Counter(r.decision.value for r in run.results)
    return {
        "bench": "add",
        "memories": n,
        "seed": seed,
        "batch": batch,
        "embedder": timer.name,
        "batch_per_second": round(n / stats.seconds, 2) if stats.seconds else 0.0,
        "build_seconds": round(stats.seconds, 3),
        "embed_seconds": round(stats.embed_seconds, 3),
        "embed_share": round(stats.embed_seconds / stats.seconds, 4) if stats.seconds else 0.0,
        "decisions": dict(sorted(stats.decisions.items())),
        "stored": stored,
        "singles": len(run.ms),
        "single_warmup": warmup,
        **latency_summary(run.ms, "single_"),
        "single_embed_share": run.embed_share,
        "single_decisions": dict(sorted(single_decisions.items())),
    }


def _time_on_store(
    prepared: PreparedStore,
    seed: int,
    warmup: Sequence[T],
    timed: Sequence[T],
    call: Callable[[Any, T], R],
) -> tuple[_Timed[R], dict[str, Any], dict[str, Any]]:
    """Open the prepared store and time ``call(engine, item)`` (see :func:`_time_calls`).

    Returns the timing and the keys every search/inject report starts and ends with."""
    engine, timer = open_engine(prepared.home, prepared.embedder)
    with engine:
        run = _time_calls(timer, warmup, timed, lambda item: call(engine, item))
        stored = engine.count(OWNER)
    head = {
        "memories": prepared.build.memories,
        "stored": stored,
        "seed": seed,
        "embedder": timer.name,
        "queries": len(run.ms),
    }
    tail = {
        "warmup_queries": len(warmup),
        "warmup_seconds": round(run.warmup_seconds, 3),
        "build_seconds": round(prepared.build.seconds, 3),
        "build_reused": prepared.reused,
    }
    return run, head, tail


def _found(target: str | None, contents: Sequence[str]) -> bool:
    if target is None:
        return False
    key = target.rstrip(".").casefold()
    return any(c.casefold().startswith(key) for c in contents)


def run_search(
    prepared: PreparedStore,
    *,
    seed: int = 0,
    queries: int = 200,
    warmup: int = 20,
    limit: int = 10,
) -> dict[str, Any]:
    """Time ``queries`` hybrid searches (hits and misses) on a prepared store, after ``warmup``
    untimed ones (model load, index load and first queries)."""
    qs = Generator(seed).queries(warmup + queries, prepared.build.memories)
    run, head, tail = _time_on_store(
        prepared,
        seed,
        qs[:warmup],
        qs[warmup:],
        lambda engine, q: engine.search(q.text, owner=OWNER, limit=limit),
    )
    timed = list(zip(qs[warmup:], run.ms, run.results, strict=True))
    hit_ms = [ms for q, ms, _ in timed if q.hit]
    miss_ms = [ms for q, ms, _ in timed if not q.hit]
    found = sum(
        1 for q, _, hits in timed if q.hit and _found(q.target, [h.memory.content for h in hits])
    )
    return {
        "bench": "search",
        **head,
        "hit_queries": len(hit_ms),
        "miss_queries": len(miss_ms),
        "limit": limit,
        **latency_summary(run.ms),
        "hit_p50_ms": round(percentile(hit_ms, 50), 3),
        "miss_p50_ms": round(percentile(miss_ms, 50), 3),
        "embed_share": run.embed_share,
        "recall_at_limit": round(found / len(hit_ms), 4) if hit_ms else 0.0,
        **tail,
    }


def run_inject(
    prepared: PreparedStore,
    *,
    seed: int = 0,
    queries: int = 200,
    sessions: int = 8,
    warmup: int = 20,
) -> dict[str, Any]:
    """Time ``queries`` injection turns over ``sessions`` sessions (each turn with the session's
    two previous messages as ``recent``), after ``warmup`` untimed turns in other sessions."""
    turns = Generator(seed).conversation(
        warmup + queries, prepared.build.memories, sessions=sessions
    )
    run_tag = f"bench-{os.getpid()}-{time.time_ns()}"

    def inject(engine: Any, item: tuple[str, Turn]) -> Any:
        session, turn = item
        return engine.inject(session, turn.text, owner=OWNER, recent=list(turn.recent))

    run, head, tail = _time_on_store(
        prepared,
        seed,
        [(f"{run_tag}:warmup", t) for t in turns[:warmup]],
        [(f"{run_tag}:{t.session}", t) for t in turns[warmup:]],
        inject,
    )
    skipped: Counter[str] = Counter()
    for result in run.results:
        skipped.update(result.skipped)
    return {
        "bench": "inject",
        **head,
        "sessions": sessions,
        **latency_summary(run.ms),
        "embed_share": run.embed_share,
        "items_per_turn": (
            round(sum(len(r.items) for r in run.results) / len(run.ms), 3) if run.ms else 0.0
        ),
        "turns_with_block": sum(1 for r in run.results if r.block is not None),
        "skipped": dict(sorted(skipped.items())),
        **tail,
    }
