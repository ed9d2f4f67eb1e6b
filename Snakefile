# CW-GRPO replication: data -> base models -> RL training -> evaluation -> Table 1, figures, claims.
#   snakemake --cores 2                                    # tiny preset (config/config.yaml), CPU
#   snakemake --cores 2 --configfile config/smoke.yaml     # CI smoke run
#   snakemake --profile profiles/gpu-box --configfile config/paper.yaml --use-conda # the paper, one GPU box
#   snakemake --profile profiles/slurm --configfile config/paper.yaml --use-conda   # the paper, on Slurm
# Layout of results/<preset>/ and the file formats: docs/architecture.md.

from snakemake.utils import min_version

min_version("9.27")


# The tiny preset is the default. A preset given with --configfile replaces it instead of being merged
# into it (Snakemake would otherwise merge the two, e.g. keep the tiny sizes in the paper preset).
if not workflow.overwrite_configfiles:

    configfile: "config/config.yaml"


report: "workflow/front_page.rst"  # the report's front page: the preset, where Table 1 is, what † means


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/models.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/failures.smk"


onstart:
    check_machine()  # the GPU cap against the GPUs this machine shows; DeepSpeed and g++ for CPU training


onerror:
    logger.error(failed_job_logs(workflow.scheduler))  # each failed job's cause, from its log


onsuccess:
    logger.info(finished_run_message())  # Table 1, runs without learning signal, the outputs, the report


localrules:
    all,


rule all:
    default_target: True
    input:
        get_final_output(),


check_profile()  # the profile's rule names and resource keys, now that every rule exists
