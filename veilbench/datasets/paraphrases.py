"""An embedded text data set: a small paraphrase corpus (groups of sentences with one meaning).

Written for this benchmark (STS-B is not available offline, ScoreShield spec §9 E6). A sentence's
label is its group, so similarity tasks become paraphrase retrieval, verification and clustering.
"""

from __future__ import annotations

import numpy as np

PARAPHRASE_GROUPS: tuple[tuple[str, ...], ...] = (
    ("The cat is sleeping on the sofa.", "A cat naps on the couch.", "On the sofa, a cat is asleep.",
     "The kitten dozes on the settee."),
    ("The train to Paris was cancelled.", "They cancelled the Paris train.", "There is no train to Paris today.",
     "The rail service to Paris has been called off."),
    ("She is learning to play the violin.", "She takes violin lessons.", "She is studying the violin.",
     "Learning the violin is her new hobby."),
    ("Interest rates rose again this month.", "The central bank raised rates once more.",
     "Borrowing costs went up again this month.", "Another rate hike was announced this month."),
    ("The hikers reached the summit at dawn.", "At sunrise the climbers got to the top.",
     "The walkers arrived at the peak early in the morning.", "By daybreak the hikers were on the summit."),
    ("He forgot his umbrella and got soaked.", "Without his umbrella he got drenched.",
     "He left the umbrella at home and the rain soaked him.", "He got wet because he had no umbrella."),
    ("The museum opens at nine in the morning.", "Doors open at 9 a.m. at the museum.",
     "The museum's opening time is nine o'clock.", "You can enter the museum from 9 am."),
    ("The software update fixed the login bug.", "After the patch, the sign-in error was gone.",
     "The new release repaired the login problem.", "Updating the app solved the authentication bug."),
    ("Tomatoes grow best in full sun.", "Tomato plants need lots of sunlight.",
     "For a good tomato crop, give the plants plenty of sun.", "Sunny spots are ideal for growing tomatoes."),
    ("The team won the championship final.", "They took the title in the final match.",
     "The squad triumphed in the championship game.", "Victory in the final made them champions."),
    ("The patient was given antibiotics for the infection.", "Doctors treated the infection with antibiotics.",
     "Antibiotics were prescribed to fight the infection.", "The infection was treated using antibiotic drugs."),
    ("The bakery sells fresh bread every morning.", "Each morning the bakery has freshly baked loaves.",
     "You can buy fresh bread at the bakery daily.", "New bread is baked and sold there every morning."),
)


def paraphrase_corpus() -> tuple[list[str], np.ndarray]:
    """All sentences (n,) and their group labels (n,) int."""
    sentences = [s for group in PARAPHRASE_GROUPS for s in group]
    labels = np.repeat(np.arange(len(PARAPHRASE_GROUPS)), [len(g) for g in PARAPHRASE_GROUPS])
    return sentences, labels.astype(np.int64)
