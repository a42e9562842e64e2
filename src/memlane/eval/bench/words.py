"""Word lists of the synthetic memories (:mod:`memlane.eval.bench.generator`): names, cities,
companies, tools, foods ... a few hundred of each, so full-text search and the vectors see a varied
vocabulary; and the openers, prefixes and unrelated topics of the benchmark's queries.

Every list is a ``list[str]`` (``CUISINES``: ``(cuisine, dish)`` pairs). Written by hand for the
benchmark; changing any of them changes the generator's output (bump ``GENERATOR_VERSION``).
"""

from __future__ import annotations


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
STREET_NAMES = [f"{a} {b}" for a in STREETS for b in STREET_KINDS]
RESTAURANTS = [f"the {a} {b}" for a in RESTAURANT_A for b in RESTAURANT_B]
