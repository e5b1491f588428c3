"""/api/info carries the model's label smoothing (epsilon_ls, from its config), which the page turns into the
note beside the probabilities: no probability of a model trained with it reaches 1."""

from aiayn.checkpoint import load_config_file


def test_info_reports_the_label_smoothing_the_model_was_trained_with(client, translator):
    expected = load_config_file(translator.model_dir).train.label_smoothing
    assert client.get("/api/info").json()["label_smoothing"] == expected
