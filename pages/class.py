"""The class: one experiment for the whole room, drawn and guessed by every student, shown live."""

import streamlit as st

from ui.class_page import broadcast, rounds
from ui.class_page.draws import DRAWS_PER_PRESS
from ui.common.navigation import redirect_legacy_run

redirect_legacy_run()  # see ui/common/navigation.py: a fresh server's first deep link runs this file without app.py

st.title("The class, together")
st.caption(
    "Every student's laptop runs the same experiment with its own seed; this page pools what the whole "
    "room did, live. The teacher starts each round on their own prompt and settings, and a new round or the "
    "reveal reaches every open page by itself: nobody needs to reload."
)
if broadcast.teacher_key() is None:
    st.info(
        "Class mode is off: this server was started without a teacher key "
        f"(`{broadcast.TEACHER_KEY_ENV}`), so nobody can broadcast, start a round or follow. "
        "docs/classroom.md says how to start a class server (docs/school.md: several, for a school).",
        icon=":material/groups:",
    )
    st.stop()
rounds.teacher_controls()

# Side by side: on a 1366×768 laptop a student sees the draw button and the guess box without scrolling (stacked,
# the guess box sat under the draw round's chart, out of sight); a narrow window stacks them again.
draw_column, guess_column = st.columns([3, 2], gap="large")
with draw_column:
    st.header("1 · Draw for the class")
    st.markdown(
        "One draw is a coin toss; a thousand show the distribution. Here the thousand come from the room: "
        f"each press draws {DRAWS_PER_PRESS} tokens from your own seeded stream, and the bars pool "
        "every student's draws against the sampler's exact probabilities."
    )
    rounds.draw_panel()
with guess_column:
    st.header("2 · Guess the next token")
    rounds.guess_panel()

st.header("What to try next")
st.markdown(
    "- Watch the χ² verdict as the draws pile up: with a few dozen draws the bars wobble, with a few hundred they "
    "sit on the probabilities.\n"
    "- Teacher: start a new draw round at T = 0.3, then at T = 1.5, and compare the shapes.\n"
    "- Guess first, then open **Logits & temperature** to see why the model disagrees (or agrees) with the room."
)
