"""Specification of estimate_inference_memory (formula: memory_estimation module docstring)."""

import pytest

from kernel_pytorch.hardware_abstraction.memory_estimation import estimate_inference_memory

LLAMA2_7B = dict(hidden=4096, intermediate=11008, layers=32, vocab=32000, heads=32)
# Mistral-7B-v0.1: grouped-query attention with 8 KV heads.
MISTRAL_7B = dict(hidden=4096, intermediate=14336, layers=32, vocab=32000, heads=32, kv_heads=8)
GIB = 1024**3


def test_llama2_7b_parameter_count_matches_the_published_checkpoint():
    estimate = estimate_inference_memory(**LLAMA2_7B, max_seq_len=4096, bytes_per_param=2)
    # meta-llama/Llama-2-7b-hf has 6,738,415,616 parameters.
    assert estimate.parameter_count == 6_738_415_616


def test_mistral_7b_parameter_count_uses_grouped_query_attention():
    estimate = estimate_inference_memory(**MISTRAL_7B, max_seq_len=4096)
    # mistralai/Mistral-7B-v0.1 has 7,241,732,096 parameters.
    assert estimate.parameter_count == 7_241_732_096


def test_weights_bytes_are_parameters_times_bytes_per_param():
    bf16 = estimate_inference_memory(**LLAMA2_7B, bytes_per_param=2)
    int4 = estimate_inference_memory(**LLAMA2_7B, bytes_per_param=0.5)
    assert bf16.weights_bytes == 2 * bf16.parameter_count
    assert int4.weights_bytes == bf16.weights_bytes // 4


def test_kv_cache_of_llama2_7b_at_4096_tokens_in_fp16_is_two_gib():
    estimate = estimate_inference_memory(**LLAMA2_7B, max_seq_len=4096, bytes_per_param=2)
    # 2 (k,v) x 32 layers x 32 heads x 128 head_dim x 4096 tokens x 2 bytes
    assert estimate.kv_cache_bytes == 2 * GIB


def test_grouped_query_attention_shrinks_the_kv_cache_by_heads_over_kv_heads():
    mha = estimate_inference_memory(**{**MISTRAL_7B, "kv_heads": 32}, max_seq_len=4096)
    gqa = estimate_inference_memory(**MISTRAL_7B, max_seq_len=4096)
    assert mha.kv_cache_bytes == 4 * gqa.kv_cache_bytes


def test_kv_cache_and_activations_scale_with_batch_size():
    one = estimate_inference_memory(**LLAMA2_7B, max_seq_len=1024)
    four = estimate_inference_memory(**LLAMA2_7B, max_seq_len=1024, batch_size=4)
    assert four.kv_cache_bytes == 4 * one.kv_cache_bytes
    assert four.activations_bytes == 4 * one.activations_bytes
    assert four.weights_bytes == one.weights_bytes


def test_quantised_weights_keep_a_16_bit_kv_cache_by_default():
    int8 = estimate_inference_memory(**LLAMA2_7B, max_seq_len=4096, bytes_per_param=1)
    assert int8.kv_cache_bytes == 2 * GIB
    fp8_cache = estimate_inference_memory(**LLAMA2_7B, max_seq_len=4096, bytes_per_param=1, kv_bytes_per_element=1)
    assert fp8_cache.kv_cache_bytes == GIB


def test_tied_embeddings_drop_the_lm_head():
    untied = estimate_inference_memory(**LLAMA2_7B)
    tied = estimate_inference_memory(**LLAMA2_7B, tie_word_embeddings=True)
    assert untied.parameter_count - tied.parameter_count == 32000 * 4096


def test_ungated_mlp_has_two_matrices_per_layer():
    gated = estimate_inference_memory(**LLAMA2_7B)
    plain = estimate_inference_memory(**LLAMA2_7B, gated_mlp=False)
    assert gated.parameter_count - plain.parameter_count == 32 * 4096 * 11008


def test_total_is_the_sum_of_the_breakdown():
    estimate = estimate_inference_memory(**LLAMA2_7B, max_seq_len=2048)
    parts = estimate.breakdown()
    assert parts["total_bytes"] == parts["weights_bytes"] + parts["kv_cache_bytes"] + parts["activations_bytes"]
    assert estimate.total_gib == pytest.approx(estimate.total_bytes / GIB)


def test_str_reports_each_component_in_gib():
    text = str(estimate_inference_memory(**LLAMA2_7B, max_seq_len=4096))
    assert "kv cache" in text and "2.00 GiB" in text
    assert "6.74 B" in text


@pytest.mark.parametrize(
    "override, message",
    [
        ({"hidden": 0}, "hidden must be a positive integer"),
        ({"layers": -1}, "layers must be a positive integer"),
        ({"heads": 30}, "heads (30) must divide hidden (4096)"),
        ({"kv_heads": 5}, "kv_heads (5) must divide heads (32)"),
        ({"bytes_per_param": 0}, "bytes_per_param must be a positive number"),
        ({"max_seq_len": 2.5}, "max_seq_len must be a positive integer"),
    ],
)
def test_bad_sizes_are_rejected_with_the_offending_argument_named(override, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        estimate_inference_memory(**{**LLAMA2_7B, **override})
