"""A synthetic long conversation between two people, with questions about it and their answers.

Built to measure history search the way it is used: someone asks, in their own words, about
something said long ago. What makes it hard, as in real chats:

- the answer is often in the *reply* to the message that names the topic ("Which airline did we book
  for the Lisbon trip?" → "TAP, the early departure."), so the answering message shares no word with
  the question;
- facts are mentioned in passing, inside messages about something else;
- questions paraphrase ("boss" for "manager", "carrier" for "airline", "operation" for "surgery") and
  use other word forms ("decide" / "decision", "pricing" / "price") — never the answer itself;
- the topic words come back in unrelated small talk (other trips, other prices, other meetings), so a
  query word alone does not point at the answer;
- some replies go through a tool round-trip (a canvas card, its tool_result) before the final text.

A message *answers* a question when it contains the fact's answer value (e.g. "TAP"): values are
unique within a conversation, so this is exact. Everything is seeded: same seed, same conversation.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

# --- the facts --------------------------------------------------------------------------------------
# kind: "reply"   — the user names the topic, the assistant's reply holds the answer;
#       "answer"  — the assistant asks, the user's reply holds the answer;
#       "passing" — the user mentions the fact inside a message about something else;
#       "stated"  — the user states the fact plainly (the assistant acknowledges).
# `key` names the slot whose value marks an answering message.

FACTS: list[dict[str, Any]] = [
    {
        "kind": "reply",
        "ask": [
            "Which airline did we end up booking for the {city} trip?",
            "Did we ever settle the flights to {city}?",
        ],
        "say": [
            "{airline}, the early departure. I forwarded you the confirmation.",
            "We went with {airline}, out Friday morning.",
        ],
        "questions": ["What airline are we flying to {city}?", "Which carrier did I book for {city}?"],
        "key": "airline",
    },
    {
        "kind": "reply",
        "ask": [
            "We need to settle what to charge for the {product} plan. Thoughts?",
            "Pricing for {product} is still open, right?",
        ],
        "say": ["Let's go with {price} a month; it undercuts the competition and still covers support."],
        "questions": [
            "What did we decide about pricing for {product}?",
            "How much are we charging for the {product} tier?",
        ],
        "key": "price",
    },
    {
        "kind": "passing",
        "say": [
            "Long morning: my dentist, Dr. {doctor}, kept me in the chair for an hour, and then the bus broke down."
        ],
        "questions": ["Who is my dentist?", "What was the dentist's name again?"],
        "key": "doctor",
    },
    {
        "kind": "stated",
        "say": ["The new wifi password is {password} by the way, the router reset itself."],
        "questions": ["What's the wifi password?", "What is the password for the internet at home?"],
        "key": "password",
    },
    {
        "kind": "passing",
        "say": ["My sister {sister}'s birthday is on {birthday}, and I still need to find a gift, any ideas?"],
        "questions": ["When is my sister's birthday?", "What date is {sister}'s birthday?"],
        "key": "birthday",
    },
    {
        "kind": "answer",
        "ask": ["How did the car repair go?", "Did the garage ever call back about the car?"],
        "say": ["Fine in the end, the garage charged {repair} for the brakes."],
        "questions": ["How much did the brake repair cost?", "What did I pay for fixing the car?"],
        "key": "repair",
    },
    {
        "kind": "reply",
        "ask": [
            "Is the quarterly review still on Thursday?",
            "Do you know when the quarterly review is happening?",
        ],
        "say": ["No, {colleague} moved it to {weekday} at {meeting_time}."],
        "questions": ["When is the quarterly review now?", "What day did the review get moved to?"],
        "key": "meeting_time",
    },
    {
        "kind": "reply",
        "ask": [
            "Any ideas for a nice dinner place for our anniversary?",
            "I want somewhere special for the anniversary dinner.",
        ],
        "say": ["{restaurant} on {street}: quiet, candles, a good wine list."],
        "questions": [
            "Which restaurant did you suggest for the anniversary?",
            "Where should we eat for our anniversary?",
        ],
        "key": "restaurant",
    },
    {
        "kind": "passing",
        "say": ["Picked up {child} from school; her teacher, Ms. {teacher}, says she's doing great in maths."],
        "questions": ["What's the name of {child}'s teacher?", "Who teaches my daughter?"],
        "key": "teacher",
    },
    {
        "kind": "stated",
        "say": ["Saving this here: the landlord's number is {phone}."],
        "questions": ["What's my landlord's phone number?", "How do I reach the landlord?"],
        "key": "phone",
    },
    {
        "kind": "answer",
        "ask": ["What are you reading these days?", "Found a good book lately?"],
        "say": ["{book}, a friend lent it to me and I can't put it down."],
        "questions": ["Which book was I reading?", "What novel did my friend lend me?"],
        "key": "book",
    },
    {
        "kind": "reply",
        "ask": [
            "Should I switch my gym sessions to mornings?",
            "I keep skipping the gym in the evenings, what should I change?",
        ],
        "say": ["Yes: {gym_days} at {gym_time} fits your calendar best."],
        "questions": ["When did we decide I'd go to the gym?", "What's my workout schedule?"],
        "key": "gym_time",
    },
    {
        "kind": "passing",
        "say": [
            "Note for Saturday's dinner party: {guest} is allergic to {allergen}, so I'll skip the dessert I planned."
        ],
        "questions": ["Who has a food allergy?", "What is {guest} allergic to?"],
        "key": "allergen",
    },
    {
        "kind": "reply",
        "ask": [
            "What's the marketing budget for Q3 looking like?",
            "Did finance get back to us on the Q3 marketing money?",
        ],
        "say": ["They approved {budget}, down from last quarter."],
        "questions": ["How much money did finance approve for marketing?", "What's the Q3 marketing budget?"],
        "key": "budget",
    },
    {
        "kind": "stated",
        "say": ["Booked the vet for {pet} on {vet_date}, it's time for the vaccinations."],
        "questions": ["When is {pet}'s vaccination appointment?", "When does the dog go to the vet?"],
        "key": "vet_date",
    },
    {
        "kind": "reply",
        "ask": [
            "Did you find a hotel in {conf_city} for the conference?",
            "Where do we sleep during the {conf_city} conference?",
        ],
        "say": ["The {hotel}, walking distance from the venue, breakfast included."],
        "questions": ["Where are we staying for the conference?", "Which hotel did you book in {conf_city}?"],
        "key": "hotel",
    },
    {
        "kind": "passing",
        "say": ["So the offer came in at {salary} plus stock, which is honestly more than I expected from them."],
        "questions": ["How much was the salary in my job offer?", "What did the new job offer pay?"],
        "key": "salary",
    },
    {
        "kind": "stated",
        "say": ["I've switched to {coffee} beans at home, they're much less bitter."],
        "questions": ["What coffee beans do I buy?", "Which coffee brand am I using now?"],
        "key": "coffee",
    },
    {
        "kind": "reply",
        "ask": [
            "When do we tell the client the {project} launch will be?",
            "We owe the client a launch date for {project}.",
        ],
        "say": ["Let's commit to {launch} and keep two weeks of buffer."],
        "questions": ["What launch date did we commit to for {project}?", "When is the {project} deadline?"],
        "key": "launch",
    },
    {
        "kind": "answer",
        "ask": ["How's {friend} doing?", "Heard anything from {friend} lately?"],
        "say": ["Good! She moved to {friend_city} for a job at a hospital."],
        "questions": ["Where did {friend} move to?", "Which city does {friend} live in now?"],
        "key": "friend_city",
    },
    {
        "kind": "passing",
        "say": ["The plumber, {plumber}, finally fixed the leak under the sink, so the kitchen is usable again."],
        "questions": ["Who fixed the leak?", "What was the plumber called?"],
        "key": "plumber",
    },
    {
        "kind": "stated",
        "say": ["Policy number for the home insurance: {policy}."],
        "questions": [
            "What's my home insurance policy number?",
            "What is the insurance policy number for the house?",
        ],
        "key": "policy",
    },
    {
        "kind": "answer",
        "ask": ["Did your cousin set a wedding date yet?", "Any news on your cousin's wedding?"],
        "say": ["Yes, {wedding}, in a barn near {town}."],
        "questions": ["When is my cousin getting married?", "Where is the wedding?"],
        "key": "town",
    },
    {
        "kind": "stated",
        "say": ["The doctor bumped my {medicine} dose to {dose}."],
        "questions": [
            "What dose of {medicine} am I on now?",
            "How much medication did the doctor prescribe?",
        ],
        "key": "dose",
    },
    {
        "kind": "passing",
        "say": ["{child2} outgrew her sneakers again, she's a {shoe} now, third pair this year."],
        "questions": ["What shoe size does {child2} wear?", "Which size shoes does {child2} need?"],
        "key": "shoe",
    },
    {
        "kind": "reply",
        "ask": [
            "What was that game we played at {host}'s place?",
            "I want to buy the board game from {host}'s party.",
        ],
        "say": ["{game}, the one with the trains and the little cards."],
        "questions": [
            "Which board game did we play at {host}'s?",
            "What's the name of the game from {host}'s house?",
        ],
        "key": "game",
    },
    {
        "kind": "reply",
        "ask": ["Which laptop should I buy for work?", "I need a new work laptop, help me choose."],
        "say": ["The {laptop}; better battery than the others you listed and it's lighter."],
        "questions": ["What laptop did you recommend?", "Which computer should I get?"],
        "key": "laptop",
    },
    {
        "kind": "reply",
        "ask": ["When's my tax filing due this year?", "Remind me of the tax deadline."],
        "say": ["{tax_date}, since you have the extension."],
        "questions": ["When do I need to file taxes?", "What's the deadline for my tax return?"],
        "key": "tax_date",
    },
    {
        "kind": "passing",
        "say": ["The neighbours' {breed}, {dog}, barked all night again, I barely slept."],
        "questions": ["What's the name of the neighbours' dog?", "Which dog keeps barking next door?"],
        "key": "dog",
    },
    {
        "kind": "answer",
        "ask": ["Did they accept your conference talk?", "Any news from the program committee?"],
        "say": ["Yes! '{talk}' got a thirty-minute slot."],
        "questions": ["What's the title of my accepted talk?", "Which talk got accepted at the conference?"],
        "key": "talk",
    },
    {
        "kind": "reply",
        "ask": ["Do we need a car in {rent_city}?", "How do we get around {rent_city}?"],
        "say": ["I reserved one with {rental}, pickup at the airport."],
        "questions": ["Which rental company is our car with?", "Who did we rent the car from?"],
        "key": "rental",
    },
    {
        "kind": "passing",
        "say": ["Mom's knee surgery got scheduled for {surgery}, so I'll take that week off to help her."],
        "questions": ["When is my mother's operation?", "When is mom's knee surgery?"],
        "key": "surgery",
    },
    {
        "kind": "reply",
        "ask": [
            "Where should we take the team for the end-of-year lunch?",
            "Team lunch in December: any place in mind?",
        ],
        "say": ["{canteen}, they do set menus for groups."],
        "questions": ["Where's the team lunch?", "Which place did we pick for the end of year team meal?"],
        "key": "canteen",
    },
    {
        "kind": "stated",
        "say": ["Locker combination at the pool is {code}."],
        "questions": ["What's the combination for my locker?", "What is the code of my pool locker?"],
        "key": "code",
    },
    {
        "kind": "answer",
        "ask": ["Found anything good to listen to on the commute?", "What do you listen to on the train?"],
        "say": ["{podcast}, it's about the history of {subject}."],
        "questions": ["What podcast am I listening to?", "Which show do I listen to while commuting?"],
        "key": "podcast",
    },
    {
        "kind": "answer",
        "ask": ["Who's your new manager after the reorg?", "So who do you report to now?"],
        "say": ["{manager}, from the Berlin office. Seems nice so far."],
        "questions": ["Who is my new boss?", "What's my new manager's name?"],
        "key": "manager",
    },
]

SLOTS: dict[str, list[str]] = {
    "city": ["Lisbon", "Krakow", "Seville", "Tallinn", "Bologna", "Ghent"],
    "airline": ["Aegean", "Finnair", "Iberia", "Vueling", "Icelandair", "Transavia"],
    "product": ["Pro", "Studio", "Team", "Premium", "Scale"],
    "price": ["$49", "$29", "$79", "$119", "$39"],
    "doctor": ["Okafor", "Lindqvist", "Tanaka", "Moreau", "Haddad"],
    "password": ["bluepelican42", "orchard-mint-77", "Tangerine!908", "quietfox311"],
    "sister": ["Ana", "Marta", "Ines", "Clara"],
    "birthday": ["March 14", "July 2", "October 27", "January 9"],
    "repair": ["€640", "€410", "€895", "€275"],
    "colleague": ["Priyanka", "Tom", "Helga", "Dario"],
    "weekday": ["Monday", "Tuesday", "Wednesday", "Friday"],
    "meeting_time": ["10:30", "14:15", "16:45", "9:20"],
    "restaurant": ["Casa Lupo", "The Linden", "Mirabelle", "Osteria Nove"],
    "street": ["Rua Augusta", "Elm Street", "Canal Road", "Via Roma"],
    "child": ["Lily", "Maya", "Zoe", "Nora"],
    "teacher": ["Brennan", "Castellanos", "Whitfield", "Adeyemi"],
    "phone": ["+44 7700 900123", "+351 912 345 678", "+1 415 555 0142", "+49 151 2345 6789"],
    "book": ["The Glass Orchard", "Salt and Lanterns", "A Winter in Tromsø", "The Cartographer's Son"],
    "gym_days": ["Mondays and Thursdays", "Tuesdays and Fridays", "weekdays"],
    "gym_time": ["6:15", "7:05", "6:40"],
    "guest": ["Julia", "Kofi", "Sven", "Rosa"],
    "allergen": ["hazelnuts", "sesame", "shellfish", "kiwi"],
    "budget": ["$85k", "$120k", "$64k", "$150k"],
    "pet": ["Biscuit", "Pepper", "Rocco", "Miso"],
    "vet_date": ["the 23rd", "the 11th", "the 30th", "the 5th"],
    "conf_city": ["Vienna", "Porto", "Dublin", "Prague"],
    "hotel": ["Hotel Adlon Rooms", "Casa Amarela", "The Wren House", "Hotel Kranich"],
    "salary": ["€92,000", "€105,000", "€78,500", "€118,000"],
    "coffee": ["Kenyan AA", "Ethiopian Yirgacheffe", "Colombian Huila", "Sumatra Mandheling"],
    "project": ["Atlas", "Nimbus", "Harbor", "Quartz"],
    "launch": ["June 18", "September 3", "November 12", "April 29"],
    "friend": ["Sofia", "Hannah", "Amira", "Elena"],
    "friend_city": ["Rotterdam", "Gothenburg", "Valencia", "Leipzig"],
    "plumber": ["Gary Whelan", "Mick Doherty", "Luis Ortega", "Stan Kowalski"],
    "policy": ["HX-4471-9920", "PL-0083-5521", "AZ-7719-3302", "ML-5560-1187"],
    "wedding": ["August 22", "May 16", "September 26", "June 6"],
    "town": ["Sintra", "Bruges", "Stirling", "Annecy"],
    "medicine": ["lisinopril", "sertraline", "atorvastatin", "levothyroxine"],
    "dose": ["20 mg", "50 mg", "10 mg", "75 mcg"],
    "child2": ["Lily", "Maya", "Zoe", "Nora"],
    "shoe": ["size 31", "size 29", "size 33", "size 27"],
    "host": ["Marco", "Jess", "Omar", "Greta"],
    "game": ["Ticket to Ride", "Azul", "Carcassonne", "Wingspan"],
    "laptop": ["ThinkPad X1 Carbon", "MacBook Air M3", "Dell XPS 13", "Framework 13"],
    "tax_date": ["October 15", "April 30", "July 31", "January 31"],
    "breed": ["beagle", "husky", "terrier", "dachshund"],
    "dog": ["Bruno", "Luna", "Mochi", "Rex"],
    "talk": ["Boring Databases at Scale", "Queues You Can Trust", "Search Without Magic", "Caching Lies"],
    "rent_city": ["Sicily", "Crete", "Mallorca", "the Algarve"],
    "rental": ["Sixt", "Europcar", "Hertz", "Avis"],
    "surgery": ["February 12", "March 3", "December 8", "November 20"],
    "canteen": ["Bistro Vela", "The Copper Pot", "Hanami House", "Lucky Goat"],
    "code": ["4-18-27", "9-03-33", "12-40-7", "25-6-19"],
    "podcast": ["Hidden Harbors", "The Long Memory", "Deep Field", "Old Roads"],
    "subject": ["shipping", "maps", "bridges", "salt"],
    "manager": ["Priya Raman", "Jonas Falk", "Aiyana Brooks", "Mateo Ruiz"],
}

# --- small talk ----------------------------------------------------------------------------------
# Topic words of the facts come back here in other senses, so a query word alone proves nothing; the
# rest of the vocabulary is everyday words, so small talk is not made of topic words only.
TOPIC_NOUNS = [
    "trip",
    "flight",
    "flights",
    "price",
    "prices",
    "budget",
    "meeting",
    "review",
    "hotel",
    "car",
    "dinner",
    "restaurant",
    "coffee",
    "gym",
    "book",
    "school",
    "teacher",
    "doctor",
    "dog",
    "birthday",
    "password",
    "insurance",
    "manager",
    "team",
    "lunch",
    "laptop",
    "podcast",
    "wedding",
    "taxes",
    "deadline",
    "project",
    "client",
    "conference",
    "salary",
    "job",
    "offer",
    "beans",
    "surgery",
    "appointment",
    "vet",
    "shoes",
    "schedule",
    "game",
    "cousin",
    "sister",
    "mom",
    "airport",
    "rent",
    "neighbours",
    "presentation",
    "report",
    "party",
    "plan",
]
EVERYDAY_NOUNS = [
    "weather",
    "traffic",
    "garden",
    "kitchen",
    "weekend",
    "holiday",
    "train",
    "bike",
    "phone",
    "movie",
    "series",
    "groceries",
    "office",
    "email",
    "cake",
    "bakery",
    "bus",
    "umbrella",
    "jacket",
    "sofa",
    "window",
    "balcony",
    "plants",
    "tomatoes",
    "soup",
    "bread",
    "cheese",
    "pasta",
    "rice",
    "tea",
    "juice",
    "breakfast",
    "newspaper",
    "radio",
    "headphones",
    "keyboard",
    "charger",
    "backpack",
    "bottle",
    "mug",
    "blanket",
    "pillow",
    "lamp",
    "printer",
    "calendar",
    "notebook",
    "pen",
    "stairs",
    "elevator",
    "parking",
    "bridge",
    "river",
    "beach",
    "forest",
    "mountain",
    "park",
    "lake",
    "market",
    "pharmacy",
    "library",
    "museum",
    "cinema",
    "concert",
    "festival",
    "museum",
    "neighbourhood",
    "street",
    "corner",
    "square",
    "bench",
    "fountain",
    "tram",
    "taxi",
    "scooter",
    "motorbike",
    "ferry",
    "harbour",
    "station",
    "platform",
    "ticket",
    "queue",
    "crowd",
    "afternoon",
    "evening",
    "morning",
    "night",
    "sunrise",
    "sunset",
    "rain",
    "snow",
    "wind",
    "storm",
    "heat",
    "fog",
    "clouds",
    "spring",
    "autumn",
    "winter",
    "summer",
    "laundry",
    "dishes",
    "vacuum",
    "fridge",
    "oven",
    "microwave",
    "kettle",
    "toaster",
    "shower",
    "bathroom",
    "bedroom",
    "hallway",
    "garage",
    "attic",
    "basement",
    "fence",
    "roof",
    "paint",
    "wallpaper",
    "carpet",
    "curtains",
    "shelves",
    "drawer",
    "wardrobe",
    "socks",
    "sweater",
    "scarf",
    "gloves",
    "hat",
    "boots",
    "sandals",
    "glasses",
    "watch",
    "ring",
    "wallet",
    "keys",
    "passport",
    "documents",
    "letter",
    "parcel",
    "delivery",
    "courier",
    "receipt",
    "invoice",
    "bank",
    "account",
    "card",
    "cash",
    "coins",
    "savings",
    "pension",
    "hobby",
    "guitar",
    "piano",
    "drawing",
    "painting",
    "knitting",
    "puzzle",
    "crossword",
    "chess",
    "football",
    "tennis",
    "running",
    "yoga",
    "swimming",
    "hiking",
    "camping",
    "fishing",
    "cooking",
    "baking",
    "gardening",
    "reading",
    "writing",
    "photography",
    "podcasting",
]
ADJECTIVES = [
    "annoying",
    "lovely",
    "strange",
    "quiet",
    "busy",
    "slow",
    "quick",
    "expensive",
    "cheap",
    "tiny",
    "huge",
    "old",
    "new",
    "weird",
    "funny",
    "boring",
    "nice",
    "messy",
    "calm",
    "loud",
    "bright",
    "dark",
    "warm",
    "cold",
    "wet",
    "dry",
]
RELATIVES = ["brother", "sister", "dad", "mom", "uncle", "aunt", "cousin", "neighbour", "colleague", "friend"]
VERBS = [
    "fix",
    "check",
    "clean",
    "move",
    "sort",
    "cancel",
    "finish",
    "start",
    "organise",
    "order",
    "return",
    "replace",
    "paint",
    "visit",
    "call",
]
USER_SMALL_TALK = [
    "I keep thinking about the {n} situation, not sure what to do yet.",
    "Did you see the news about the {n}? Crazy.",
    "The {n} was a mess again today, and the {n} didn't help either.",
    "Can you remind me later to {v} the {n}?",
    "I'm tired, the {n} took all afternoon.",
    "Honestly this week has been a lot, between the {n} and the {n}.",
    "We should plan something around the {n} at some point.",
    "Random thought: what if we skipped the {n} this year?",
    "My {n} is acting up again, it's so {a}.",
    "Ugh, another email about the {n}.",
    "Had a long call about the {n} and the {n}, nothing decided.",
    "I need to {v} the {n} before the weekend.",
    "What would you do about a {a} {n}?",
    "Is it normal that the {n} is this {a}?",
    "Went for a walk by the {n}, the {n} can wait until Monday.",
    "The {n} near our place closed, which is a shame, it was {a}.",
    "I finally managed to {v} the {n}!",
    "Not much news, just the {n} and a {a} {n}.",
    "Remind me to buy a new {n}, the old one is {a}.",
    "We had {n} for dinner and watched something {a}.",
    "I need to get the {n} sorted out this week.",
    "Going to the {n} later, need anything?",
    "How much is a new {n} these days?",
    "We got a new {n}, it's {a} but I like it.",
    "Made some time for the {n} today, finally.",
    "Do you think I should use the {n} or the {n}?",
    "Can't decide between the {n} and the {n}, both are {a}.",
    "The kids want to go to the {n} again.",
    "Just got back from the {n}, it was {a}.",
    "I told my {r} about the {n}, they laughed.",
]
ASSISTANT_SMALL_TALK = [
    "That sounds stressful. Want me to make a list for the {n}?",
    "Take it one step at a time; the {n} doesn't have to be solved today.",
    "I can help you compare options for the {n} whenever you like.",
    "Good call. The {n} can wait.",
    "Makes sense. How are you feeling about the {n} overall?",
    "Noted. I'll keep the {n} in mind.",
    "You could block an hour tomorrow to {v} the {n}.",
    "That's a fair question; it depends on what matters most to you.",
    "Sounds like a good plan.",
    "Happy to help. Shall I draft a short note about the {n}?",
    "A {a} {n} can really change the mood of a day.",
    "If it helps, many people {v} the {n} first and then deal with the rest.",
    "I'd start small: {v} the {n}, then see how you feel.",
    "That's {a}, but it happens more often than you'd think.",
    "Maybe ask a friend to help with the {n}; it goes faster with two.",
    "Let me know how it goes with the {n}.",
    "You could get a new {n}, but fixing the old one is usually cheaper.",
    "How much time do you need for the {n}? I can plan around it.",
    "Going to the {n} early usually means no queue.",
    "If you use the {n} every day, it's worth getting a good one.",
    "I'd decide after you see the {n}; no need to rush.",
    "Whatever you choose, the {n} will be fine.",
]


ACKS = ["Got it, noted.", "Thanks, good to know.", "Noted!", "Okay, I'll remember that.", "Perfect, thanks."]


@dataclass
class Question:
    text: str
    answers: set[int]  # indexes into Conversation.messages


@dataclass
class Conversation:
    messages: list[tuple[str, Any]] = field(default_factory=list)  # (role, str or content blocks)
    questions: list[Question] = field(default_factory=list)


def _fill(template: str, values: dict[str, str]) -> str:
    return template.format(**values)


def _small_talk(rng: random.Random, templates: list[str], sentences: tuple[int, int], topic_share: float) -> str:
    def noun() -> str:
        return rng.choice(TOPIC_NOUNS) if rng.random() < topic_share else rng.choice(EVERYDAY_NOUNS)

    parts = []
    for _ in range(rng.randint(*sentences)):
        template = rng.choice(templates)
        while "{n}" in template:
            template = template.replace("{n}", noun(), 1)
        parts.append(template.format(a=rng.choice(ADJECTIVES), v=rng.choice(VERBS), r=rng.choice(RELATIVES)))
    return " ".join(parts)


# Share of small-talk nouns drawn from the facts' topic words (the rest are everyday words): with
# 0.15 each topic word is in about 1 % of the messages, as a recurring theme of a long chat would be.
TOPIC_SHARE = 0.15


def generate(*, seed: int, turns: int, tool_share: float = 0.05, topic_share: float = TOPIC_SHARE) -> Conversation:
    """A conversation of about `turns` exchanges (user message + assistant reply, some through a canvas
    tool round-trip), with every fact of FACTS placed once at a random turn, and two questions per fact."""
    rng = random.Random(seed)

    def _user(rng: random.Random) -> str:
        return _small_talk(rng, USER_SMALL_TALK, (1, 3), topic_share)

    def _assistant(rng: random.Random) -> str:
        return _small_talk(rng, ASSISTANT_SMALL_TALK, (2, 4), topic_share)

    values = {slot: rng.choice(options) for slot, options in SLOTS.items()}
    values["child2"] = rng.choice([child for child in SLOTS["child2"] if child != values["child"]])
    placements = {turn: index for index, turn in enumerate(rng.sample(range(turns), len(FACTS)))}
    conversation = Conversation()
    messages = conversation.messages
    tool_number = 0

    def assistant(text: str) -> None:
        nonlocal tool_number
        if rng.random() < tool_share:
            tool_number += 1
            tool_id = f"toolu_{seed}_{tool_number}"
            title = rng.choice(["Summary", "Notes", "Plan", "Details"])
            messages.append(
                (
                    "assistant",
                    [
                        {"type": "text", "text": "Let me put that on the canvas."},
                        {
                            "type": "tool_use",
                            "id": tool_id,
                            "name": "canvas_add_card",
                            "input": {"id": f"card{tool_number}", "title": title, "body": text},
                        },
                    ],
                )
            )
            messages.append(("user", [{"type": "tool_result", "tool_use_id": tool_id, "content": "ok"}]))
        messages.append(("assistant", text))

    for turn in range(turns):
        fact_index = placements.get(turn)
        if fact_index is None:
            messages.append(("user", _user(rng)))
            assistant(_assistant(rng))
            continue
        fact = FACTS[fact_index]
        said = _fill(rng.choice(fact["say"]), values)
        kind = fact["kind"]
        if kind == "reply":
            messages.append(("user", _fill(rng.choice(fact["ask"]), values)))
            assistant(said)
        elif kind == "answer":
            # The assistant's question closes the previous exchange; the user answers it.
            messages.append(("user", _user(rng)))
            assistant(_fill(rng.choice(fact["ask"]), values))
            messages.append(("user", said))
            assistant(rng.choice(ACKS))
        elif kind == "passing":
            messages.append(("user", f"{_user(rng)} {said}"))
            assistant(_assistant(rng))
        else:  # stated
            messages.append(("user", said))
            assistant(rng.choice(ACKS))

    texts = [_readable(content) for _, content in messages]
    for fact in FACTS:
        key_value = values[fact["key"]]
        answers = {index for index, text in enumerate(texts) if key_value in text}
        for question in fact["questions"]:
            conversation.questions.append(Question(text=_fill(question, values), answers=answers))
    return conversation


def _readable(content: Any) -> str:
    from conversations.content import normalize_content, readable_text

    return readable_text(normalize_content(content))
