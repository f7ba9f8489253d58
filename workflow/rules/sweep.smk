# Layer sweeps (hidden_layers: [...], vertebrae.planning.sweeps): one job per shard runs the model once per batch
# and writes every layer's shard file (the one its single-layer candidate's embed job would write) into one folder;
# each layer's merge job (merge_embeddings, merge_retrieval_embeddings) reads its file from the folders.
rule embed_sweep_shard:
    input:
        unpack(get_inputs),
    output:
        shards=directory(PLAN.artifact_path("sweep-shard", "{fp}", shard=("{i}", "{n}"))),
    resources:
        mem_mb=get_mem_mb,  # the largest of its layers' (vertebrae.planning.resources)
        gpu=get_gpus,
    threads: PLAN.threads["embedding"]
    conda:
        "../../envs/vertebrae.yaml"
    log:
        PLAN.log("embed_sweep_shard/{fp}/shard-{i}-of-{n}"),
    benchmark:
        PLAN.record("embed_sweep_shard/{fp}/shard-{i}-of-{n}")
    shell:
        "vertebrae embed-sweep-shard --plan-json {input.plan} --shard-index {wildcards.i} --output {output.shards}"
        " > {log} 2>&1"
