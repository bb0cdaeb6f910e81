# bash completion for cutout                                  -*- shell-script -*-
#
# Install: source this file from ~/.bashrc, or copy it to
#   ${XDG_DATA_HOME:-~/.local/share}/bash-completion/completions/cutout
# or run:  source <(cutout completion bash)

_cutout_compgen_files() {
    # $1: what to complete ("file" or "directory"); adds to COMPREPLY with filename handling
    local IFS=$'\n'
    compopt -o filenames 2>/dev/null
    COMPREPLY+=($(compgen -A "$1" -- "$cur"))
}

# >>> image flags: written from the options table (src/options.ts) by `npm run completions`; do not edit
# The image flags, and those of them that take a value (the word after them is neither a command nor an input)
_cutout_image_opts='--size --format --bg-color --crop --quality --precision --mask --alpha --no-refine --no-decontaminate --crop-margin --roi --scale --position --bg-image --keep-alpha --canvas --max-width --max-height --padding --margin --align --scaling --snap-cropped --outline-width --outline-color --outline-blur --shadow --shadow-opacity --shadow-softness --shadow-direction --shadow-elevation --shadow-color --bg-blur --bg-blur-mode --dpi --keep-metadata --animation'
_cutout_image_value_opts=' --size --format --bg-color --quality --precision --alpha --crop-margin --roi --scale --position --bg-image --keep-alpha --canvas --max-width --max-height --padding --margin --align --scaling --snap-cropped --outline-width --outline-color --outline-blur --shadow --shadow-opacity --shadow-softness --shadow-direction --shadow-elevation --shadow-color --bg-blur --bg-blur-mode --dpi --animation '

# Completes the value of the image flag $1 (uses $cur); returns 1 when $1 is not an image flag that takes a value
_cutout_image_value() {
    case $1 in
        --size) COMPREPLY=($(compgen -W 'preview full auto' -- "$cur")) ;;
        --format) COMPREPLY=($(compgen -W 'png webp jpg gif auto zip' -- "$cur")) ;;
        --bg-color) COMPREPLY=($(compgen -W 'transparent' -- "$cur")) ;;
        --quality) COMPREPLY=($(compgen -W 'fast balanced best max' -- "$cur")) ;;
        --precision) COMPREPLY=($(compgen -W 'auto fp32 int8' -- "$cur")) ;;
        --alpha) COMPREPLY=($(compgen -W 'soft hard' -- "$cur")) ;;
        --crop-margin) ;;
        --roi) ;;
        --scale) COMPREPLY=($(compgen -W 'original' -- "$cur")) ;;
        --position) COMPREPLY=($(compgen -W 'original center' -- "$cur")) ;;
        --bg-image) _cutout_compgen_files file ;;
        --keep-alpha) COMPREPLY=($(compgen -W 'never auto' -- "$cur")) ;;
        --canvas) COMPREPLY=($(compgen -W '1000x1000 original subject' -- "$cur")) ;;
        --max-width) ;;
        --max-height) ;;
        --padding) COMPREPLY=($(compgen -W '10% 0.1 40px' -- "$cur")) ;;
        --margin) COMPREPLY=($(compgen -W '5% 20px' -- "$cur")) ;;
        --align) COMPREPLY=($(compgen -W 'center top bottom left right' -- "$cur")) ;;
        --scaling) COMPREPLY=($(compgen -W 'fit fill' -- "$cur")) ;;
        --snap-cropped) COMPREPLY=($(compgen -W 'true false' -- "$cur")) ;;
        --outline-width) COMPREPLY=($(compgen -W '8px 0.01' -- "$cur")) ;;
        --outline-color) ;;
        --outline-blur) ;;
        --shadow) COMPREPLY=($(compgen -W 'none drop float cast' -- "$cur")) ;;
        --shadow-opacity) ;;
        --shadow-softness) ;;
        --shadow-direction) ;;
        --shadow-elevation) ;;
        --shadow-color) ;;
        --bg-blur) COMPREPLY=($(compgen -W 'true 0.01 0.03' -- "$cur")) ;;
        --bg-blur-mode) COMPREPLY=($(compgen -W 'gaussian bokeh' -- "$cur")) ;;
        --dpi) COMPREPLY=($(compgen -W '72 300' -- "$cur")) ;;
        --animation) COMPREPLY=($(compgen -W 'keep first' -- "$cur")) ;;
        *) return 1 ;;
    esac
}
# <<< image flags

# >>> command flags: written from the settings table and the commands (src/settings.ts, src/commands/) by `npm run completions`; do not edit
# Each command's flags (remove's besides the image flags)
_cutout_opts_remove='-o --out -c --concurrency --model -r --recursive --include-outputs --skip-existing --overwrite --json --review-below --key --inference-workers --inference-threads -q --quiet --no-progress --data --config --store --manifest --force --watch --exclude --dry-run'
_cutout_opts_models_list='--data --config --json'
_cutout_opts_models_verify='--data --config --json'
_cutout_opts_models_pull='--data --config --no-variants'
_cutout_opts_models_export='--data --config --triton --no-variants'
_cutout_opts_serve='--data --config --model --inference-workers --inference-threads --precision --preload --host --port --base-url --workers --queue-limit --sync-timeout --rate-limit --result-ttl --callback-backoff --allow-private-network --no-playground --no-removebg --no-photoroom --no-clipdrop --no-metrics --metrics-port --metrics-host --log-level --admin-token --store --results --results-path-style --results-redirect --lease-ms --upstream --upstream-model --upstream-token --no-exit-with-parent'
_cutout_opts_model_server='--data --config --model --inference-workers --inference-threads --precision --host --port --token'
_cutout_opts_keys_create='--name --test --account --expires-at --rate-limit --label --json --data --config --store'
_cutout_opts_keys_list='--json --data --config --store'
_cutout_opts_keys_revoke='--data --config --store'
_cutout_opts_credits_add='--reason --json --data --config --store'
_cutout_opts_account='--key --json --data --config --store'
_cutout_opts_usage='--key --json --data --config --store'
_cutout_opts_openapi='--data --config'
_cutout_opts_health='--url --data --config'
_cutout_opts_completion='--data --config'
# The flags that take a value (the word after them is neither a command nor an input)
_cutout_value_opts=' -o --out -c --concurrency --model --review-below --key --inference-workers --inference-threads --data --config --store --manifest --exclude --triton --precision --host --port --base-url --workers --queue-limit --sync-timeout --rate-limit --result-ttl --callback-backoff --metrics-port --metrics-host --log-level --admin-token --results --lease-ms --upstream --upstream-model --upstream-token --token --name --account --expires-at --label --reason --url '

# Completes the value of the flag $1 (uses $cur); returns 1 when $1 takes no value
_cutout_flag_value() {
    case $1 in
        -o | --out | --model | --config | --manifest) _cutout_compgen_files file ;;
        -c | --concurrency | --review-below | --key | --inference-workers | --inference-threads | --store | --exclude | --port | --base-url | --workers | --queue-limit | --sync-timeout | --rate-limit | --result-ttl | --callback-backoff | --metrics-port | --admin-token | --results | --lease-ms | --upstream | --upstream-model | --upstream-token | --token | --name | --account | --expires-at | --label | --reason | --url) ;;
        --data | --triton) _cutout_compgen_files directory ;;
        --precision) COMPREPLY=($(compgen -W 'auto fp32 int8' -- "$cur")) ;;
        --host | --metrics-host) COMPREPLY=($(compgen -A hostname -- "$cur")) ;;
        --log-level) COMPREPLY=($(compgen -W 'trace debug info warn error fatal silent' -- "$cur")) ;;
        *) return 1 ;;
    esac
}
# <<< command flags

_cutout() {
    local cur prev
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=${COMP_WORDS[COMP_CWORD - 1]}
    COMPREPLY=()

    # --flag=value: complete the value of --flag
    if [[ $cur == --*=* ]]; then
        prev=${cur%%=*}
        cur=${cur#*=}
    elif [[ $cur == = && $prev == --* ]]; then
        cur=
    elif [[ $prev == = && $COMP_CWORD -ge 2 ]]; then
        prev=${COMP_WORDS[COMP_CWORD - 2]}
    fi

    local commands='remove serve model-server keys credits account usage models openapi health completion help'
    local help_opts='-h --help'
    # Options that take a value, so the word after them is not a command or an input
    local value_opts="$_cutout_image_value_opts$_cutout_value_opts"

    # Values of the option before the cursor
    _cutout_image_value "$prev" && return
    _cutout_flag_value "$prev" && return

    # Find the command and its subcommand, skipping options and their values
    local i word cmd='' sub='' skip=''
    for ((i = 1; i < COMP_CWORD; i++)); do
        word=${COMP_WORDS[i]}
        if [[ $word == = ]]; then
            skip=1 # "--flag = value" when = is a word break: the value follows
            continue
        fi
        if [[ -n $skip ]]; then
            skip=''
            continue
        fi
        case $word in
            --*=*) continue ;;
            -*)
                [[ $value_opts == *" $word "* ]] && skip=1
                continue
                ;;
        esac
        if [[ -z $cmd ]]; then
            if [[ " $commands " == *" $word "* ]]; then cmd=$word; else cmd=remove; fi
        elif [[ -z $sub ]]; then
            sub=$word
        fi
    done

    local remove_opts="$_cutout_opts_remove $_cutout_image_opts"
    local opts=''
    case $cmd in
        '')
            if [[ $cur == -* ]]; then
                COMPREPLY=($(compgen -W "$remove_opts $help_opts -V --version" -- "$cur"))
            else
                COMPREPLY=($(compgen -W "$commands" -- "$cur"))
                _cutout_compgen_files file
            fi
            return
            ;;
        remove)
            if [[ $cur == -* ]]; then
                COMPREPLY=($(compgen -W "$remove_opts $help_opts" -- "$cur"))
            else
                _cutout_compgen_files file
            fi
            return
            ;;
        keys) [[ -z $sub && $cur != -* ]] && COMPREPLY=($(compgen -W 'create list revoke' -- "$cur")) ;;
        credits) [[ -z $sub && $cur != -* ]] && COMPREPLY=($(compgen -W 'add' -- "$cur")) ;;
        models) [[ -z $sub && $cur != -* ]] && COMPREPLY=($(compgen -W 'list verify pull export' -- "$cur")) ;;
        completion) [[ -z $sub && $cur != -* ]] && COMPREPLY=($(compgen -W 'bash zsh fish' -- "$cur")) ;;
        help) [[ -z $sub && $cur != -* ]] && COMPREPLY=($(compgen -W "$commands" -- "$cur")) ;;
    esac

    if [[ $cur == -* ]]; then
        # The command's flags (generated above): _cutout_opts_serve, _cutout_opts_keys_create, ...
        local name=_cutout_opts_${cmd//-/_}
        case $cmd in
            keys | credits | models) name=${name}_${sub//-/_} ;;
        esac
        [[ $name =~ ^[A-Za-z0-9_]+$ ]] && opts=${!name}
        COMPREPLY=($(compgen -W "$opts $help_opts" -- "$cur"))
    fi
}

complete -F _cutout cutout
