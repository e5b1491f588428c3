"""The coreference task (aiayn/data/coreference.py), its config, and bench/coreference.py's metrics."""

import importlib.util
from types import SimpleNamespace

import numpy as np
import pytest

from aiayn.config import load_config
from aiayn.data.coreference import (
    AGENT_ADJECTIVES,
    AGENT_CLAUSE_VERBS,
    AGENTS,
    ARTICLE,
    CONSTRUCTIONS,
    HELD_OUT,
    PEOPLE,
    PLACE_ADJECTIVES,
    PLACE_CLAUSE_VERBS,
    PLACES,
    PRONOUN,
    TEMPLATES,
    Construction,
    coreference_items,
    make_item,
)
from aiayn.data.datasets import load_pairs
from tests.paths import REPO

GENDER = {de: gender for _, de, gender in AGENTS + PLACES}
ENGLISH_AGENTS = {en for en, _, _ in AGENTS}
ENGLISH_PLACES = {en for en, _, _ in PLACES}


def _bench():
    spec = importlib.util.spec_from_file_location("bench_coreference", REPO / "bench" / "coreference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _items(order="source"):
    return coreference_items(3000, 300, 300, 7, order)


def _pair(item) -> tuple[str, str]:
    """(agent, place) in English."""
    nouns = (item.referent_en, item.other_en)
    return nouns if nouns[0] in ENGLISH_AGENTS else nouns[::-1]


def _words(text: str) -> list[str]:
    return text.rstrip(".").replace(",", "").split()


def _noun(nouns, english: str):
    return next(noun for noun in nouns if noun[0] == english)


@pytest.mark.parametrize("order", ["source", "pronoun_first"])
def test_pronoun_and_articles_agree_with_the_referents_gender(order):
    for split in _items(order).values():
        for item in split:
            words = _words(item.de)
            after_weil = words[[w.lower() for w in words].index("weil") + 1]
            assert after_weil == item.pronoun == PRONOUN[GENDER[item.referent_de]], item
            for noun in (item.referent_de, item.other_de):  # each noun's article has its gender
                article = words[words.index(noun) - 1].lower()
                contracted = {"am", "vom"} if GENDER[noun] != "f" else set()
                assert article in contracted | {ARTICLE[case][GENDER[noun]] for case in ARTICLE}, item


def test_every_pronoun_label_follows_from_the_english_alone():
    """An independent reading of each English sentence: the adjective says animal or place, the one noun of
    that kind in the sentence is the referent, its German gender the pronoun."""
    agent_adjectives, place_adjectives = {en for en, _ in AGENT_ADJECTIVES}, {en for en, _ in PLACE_ADJECTIVES}
    for split in _items().values():
        for item in split:
            words = _words(item.en)
            adjective = words[words.index("it") + 3]  # it was <degree> <adjective>
            kind = AGENTS if adjective in agent_adjectives else PLACES
            assert adjective in agent_adjectives | place_adjectives, item
            (referent,) = [noun for noun in kind if noun[0] in words]
            assert item.pronoun == PRONOUN[referent[2]] and item.referent_en == referent[0], item


def test_the_posts_sentences_in_german():
    animal, street = AGENTS[[a[0] for a in AGENTS].index("animal")], PLACES[[p[0] for p in PLACES].index("street")]
    tired, wide = ("tired", "müde"), ("wide", "breit")
    assert make_item(animal, street, tired, TEMPLATES[0], "source").de == \
        "Das Tier überquerte die Straße nicht, weil es zu müde war."
    assert make_item(animal, street, wide, TEMPLATES[0], "source").de == \
        "Das Tier überquerte die Straße nicht, weil sie zu breit war."
    assert make_item(animal, street, wide, TEMPLATES[0], "pronoun_first").de == \
        "Weil sie zu breit war, überquerte das Tier die Straße nicht."
    ditch = PLACES[[p[0] for p in PLACES].index("ditch")]
    assert make_item(animal, ditch, tired, TEMPLATES[5], "source").de == \
        "Das Tier kehrte am Graben um, weil es zu müde war."
    assert make_item(animal, street, tired, TEMPLATES[0], "source").en == \
        "The animal didn't cross the street because it was too tired."


@pytest.mark.parametrize(("construction", "clause", "en", "de", "pronoun"), [
    (Construction(voice="passive"), None, "The street was not crossed by the dog because it was too tired.",
     "Die Straße wurde vom Hund nicht überquert, weil er zu müde war.", "er"),
    (Construction(because_first=True, degree="very"), None,
     "Because it was very wide, the dog didn't cross the street.",
     "Weil sie sehr breit war, überquerte der Hund die Straße nicht.", "sie"),
    (Construction(relative="agent", degree="so"), ("woman", "fed"),
     "The dog that the woman fed didn't cross the street because it was so tired.",
     "Der Hund, den die Frau fütterte, überquerte die Straße nicht, weil er so müde war.", "er"),
    (Construction(because_first=True, voice="passive", relative="place"), ("hunter", "built"),
     "Because it was too wide, the street that the hunter built was not crossed by the dog.",
     "Weil sie zu breit war, wurde die Straße, die der Jäger baute, vom Hund nicht überquert.", "sie"),
    (Construction(voice="passive", relative="agent"), ("queen", "chased"),
     "The street was not crossed by the dog that the queen chased because it was too tired.",
     "Die Straße wurde vom Hund, den die Königin jagte, nicht überquert, weil er zu müde war.", "er"),
])
def test_hand_checked_constructions(construction, clause, en, de, pronoun):
    dog, street = _noun(AGENTS, "dog"), _noun(PLACES, "street")
    adjective = ("tired", "müde") if "tired" in en else ("wide", "breit")
    if clause:
        verbs = AGENT_CLAUSE_VERBS + PLACE_CLAUSE_VERBS
        clause = (_noun(PEOPLE, clause[0]), next(v for v in verbs if v[0] == clause[1]))
    item = make_item(dog, street, adjective, TEMPLATES[0], "source", construction, clause)
    assert (item.en, item.de, item.pronoun) == (en, de, pronoun)


def test_the_pronoun_first_order_puts_the_weil_clause_first_in_every_construction():
    for item in _items("pronoun_first")["train"][:300]:
        assert item.de.startswith("Weil "), item


def test_generation_is_determined_by_the_seed():
    first = coreference_items(500, 40, 40, 11)
    coreference_items.cache_clear()
    again = coreference_items(500, 40, 40, 11)
    assert first == again and first is not again
    other = coreference_items(500, 40, 40, 12)
    assert [i.en for i in other["train"]] != [i.en for i in first["train"]]


def test_held_out_constructions_never_appear_in_training():
    items = _items()
    trained = {item.construction for item in items["train"] + items["valid"] + items["test"]}
    assert trained == set(CONSTRUCTIONS) - set(HELD_OUT)  # every other construction is trained
    assert {item.construction for item in items["held_out"]} == set(HELD_OUT)
    train_en = {item.en for item in items["train"]}
    assert not train_en & {item.en for item in items["held_out"]}
    for construction in HELD_OUT:  # each part of a held-out construction is trained in another combination
        for part in ("because_first", "voice", "relative", "degree"):
            assert any(getattr(c, part) == getattr(construction, part) for c in trained), (construction, part)


def test_every_word_of_the_held_out_sets_is_a_training_word():
    """So a tokenizer trained on the training split covers the held-out sentences whole."""
    items = _items()
    english = {w for item in items["train"] for w in _words(item.en)}
    german = {w for item in items["train"] for w in _words(item.de)}
    for item in items["held_out"] + items["test"]:
        assert set(_words(item.en)) <= english and set(_words(item.de)) <= german, item


def test_held_out_noun_pairs_never_appear_in_training():
    items = _items()
    train = {_pair(item) for item in items["train"]}
    valid, test = {_pair(item) for item in items["valid"]}, {_pair(item) for item in items["test"]}
    assert valid and test and not (train & valid) and not (train & test) and not (valid & test)
    assert ("animal", "street") in test
    every_noun = {a for a, _ in train} | {p for _, p in train}
    assert every_noun == ENGLISH_AGENTS | ENGLISH_PLACES  # every noun is still learned in training
    for item in items["valid"] + items["test"]:  # held-out pronouns tell the two nouns apart
        assert GENDER[item.referent_de] != GENDER[item.other_de]


def test_the_adjective_decides_the_referent():
    for item in _items()["test"]:
        words = _words(item.en)
        adjective = words[words.index("it") + 3]
        agent = adjective in {en for en, _ in AGENT_ADJECTIVES}
        assert agent != (adjective in {en for en, _ in PLACE_ADJECTIVES})
        assert (item.referent_en in ENGLISH_AGENTS) == agent, item
    a, p = AGENTS[0], PLACES[6]  # dog (m), street (f): same nouns, the adjective alone flips the pronoun
    assert make_item(a, p, AGENT_ADJECTIVES[0], TEMPLATES[0], "source").pronoun == "er"
    assert make_item(a, p, PLACE_ADJECTIVES[0], TEMPLATES[0], "source").pronoun == "sie"


def test_the_config_selects_the_task():
    cfg = load_config(REPO / "configs" / "coreference.yaml", ["data.synthetic_train=50", "data.synthetic_valid=5"])
    train, valid = load_pairs(cfg.data, "train"), load_pairs(cfg.data, "valid")
    assert len(train) == 50 and len(valid) == 5 and all(" it was " in en.lower() for en, _ in train + valid)


def test_a_brief_training_runs_from_the_config(tmp_path):
    from aiayn.training.run import prepare_run

    cfg = load_config(REPO / "configs" / "coreference.yaml", [
        "data.synthetic_train=200", "data.synthetic_valid=8", "train.max_steps=3", "train.eval_every=3",
        "train.save_every=3", "train.bleu_sentences=4", "train.num_threads=1", "train.warmup_steps=2",
        "train.max_tokens=512", "train.average_last=1", "model.max_len=40", "data.max_len=39"])
    trainer = prepare_run(cfg, tmp_path / "run")
    trainer.train()
    assert trainer.progress.step == 3 and (tmp_path / "run" / "best" / "model.safetensors").exists()


def test_argmax_hits_and_best_head_on_hand_made_maps():
    bench = _bench()
    # two sentences, 2 layers x 2 heads over 4 keys; the referent is key 1, then key 3
    first = np.array([[[0.1, 0.7, 0.1, 0.1], [0.7, 0.1, 0.1, 0.1]], [[0.2, 0.5, 0.2, 0.1], [0, 0, 0, 1.0]]])
    second = np.array([[[0.1, 0.1, 0.1, 0.7], [0.1, 0.1, 0.1, 0.7]], [[0.5, 0.2, 0.2, 0.1], [0, 0, 0, 1.0]]])
    shares = bench.argmax_hits([first, second], [{1}, {3}])
    np.testing.assert_allclose(shares, [[1.0, 0.5], [0.5, 0.5]])
    assert bench.best_head(shares) == (0, 0, 1.0)
    assert bench.argmax_hits([first], [{0, 3}]).tolist() == [[0.0, 1.0], [0.0, 1.0]]  # a set of keys counts


def test_sentence_rows_pick_it_the_pronoun_step_and_the_referent():
    bench = _bench()
    item = make_item(AGENTS[6], PLACES[6], ("tired", "müde"), TEMPLATES[0], "source")  # animal / street
    src = item.en.split() + ["</s>"]
    tgt = item.de.split() + ["</s>"]
    tgt_in = ["<s>"] + tgt[:-1]
    maps = SimpleNamespace(source_tokens=src, target_tokens=tgt, target_input_tokens=tgt_in, maps={
        "encoder_self": np.random.rand(2, 4, len(src), len(src)), "cross": np.random.rand(1, 4, len(tgt), len(src)),
        "decoder_self": np.random.rand(1, 4, len(tgt), len(tgt_in))})
    rows = bench.sentence_rows(maps, item)
    assert rows["encoder_self"][1] == {1}  # "animal"
    np.testing.assert_array_equal(rows["encoder_self"][0], maps.maps["encoder_self"][:, :, src.index("it")])
    step = tgt.index("es")
    np.testing.assert_array_equal(rows["cross"][0], maps.maps["cross"][:, :, step])
    assert {tgt_in[i] for i in rows["decoder_self"][1]} == {"Das", "Tier"}


def test_pronoun_accuracy_reads_the_word_after_weil():
    bench = _bench()
    outputs = ["Das Tier überquerte die Straße nicht, weil es zu müde war.",
               "Weil sie zu breit war, überquerte das Tier die Straße nicht.", "Das Tier weil", "nichts"]
    assert [bench.pronoun_of(o) for o in outputs] == ["es", "sie", "", ""]
    assert bench.pronoun_accuracy(outputs, ["es", "es", "es", "es"]) == 0.25
    lines = bench.summary(0.25, {"encoder_self": np.array([[0.2, 0.3]]), "cross": np.array([[0.9, 0.1]]),
                                 "decoder_self": np.array([[0.5, 0.4]])})
    assert lines == ["pronoun accuracy 0.250", "it->referent share 0.900", "encoder it->referent share 0.300"]
    assert bench.held_out_line(0.9, {"encoder_self": np.array([[0.2, 0.85]])}) == \
        "held-out constructions: pronoun accuracy 0.900, encoder it->referent share 0.850"


def test_per_construction_accuracy_ranks_the_worst_first():
    bench = _bench()
    passive, base = Construction(voice="passive"), Construction()
    items = [SimpleNamespace(construction=c, pronoun="er", de="X, weil er müde war.") for c in (base, passive, passive)]
    outputs = ["Y, weil er müde war.", "X, weil sie müde war.", "X, weil er müde war."]
    assert bench.per_construction(outputs, items) == ["0.500  0.500  (  2)  main-first passive, too",
                                                      "1.000  0.000  (  1)  main-first active, too"]
    assert bench.exact_share(outputs, items) == pytest.approx(1 / 3)


def test_the_sentences_beyond_the_generator_are_labelled_by_their_adjective():
    bench = _bench()
    sets = bench.beyond_generator(40, seed=3)
    agent_adjectives = {en for en, _ in AGENT_ADJECTIVES}
    trained = {item.en for item in _items()["train"]}
    for name, pairs in sets.items():
        assert len(pairs) == 40, name
        for english, pronoun in pairs:
            words = _words(english)
            kind = AGENTS if words[words.index("it") + 3] in agent_adjectives else PLACES
            (referent,) = [noun for noun in kind if noun[0] in words]
            assert pronoun == PRONOUN[referent[2]] and english not in trained, english


def test_the_bench_refuses_a_missing_model_in_one_line(tmp_path, capsys):
    assert _bench().main(["--model", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err.strip()
    assert "no such directory" in err and "\n" not in err
