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
_cutout_image_opts='--size --format --bg-color --crop --quality --precision --mask --alpha --no-refine --no-decontaminate --crop-margin --roi --scale --position --bg-image --shadow'
_cutout_image_value_opts=' --size --format --bg-color --quality --precision --alpha --crop-margin --roi --scale --position --bg-image '

# Completes the value of the image flag $1 (uses $cur); returns 1 when $1 is not an image flag that takes a value
_cutout_image_value() {
    case $1 in
        --size) COMPREPLY=($(compgen -W 'preview full auto' -- "$cur")) ;;
        --format) COMPREPLY=($(compgen -W 'png webp jpg auto zip' -- "$cur")) ;;
        --bg-color) COMPREPLY=($(compgen -W 'transparent' -- "$cur")) ;;
        --quality) COMPREPLY=($(compgen -W 'fast balanced best max' -- "$cur")) ;;
        --precision) COMPREPLY=($(compgen -W 'auto fp32 int8' -- "$cur")) ;;
        --alpha) COMPREPLY=($(compgen -W 'soft hard' -- "$cur")) ;;
        --crop-margin) ;;
        --roi) ;;
        --scale) COMPREPLY=($(compgen -W 'original' -- "$cur")) ;;
        --position) COMPREPLY=($(compgen -W 'original center' -- "$cur")) ;;
        --bg-image) _cutout_compgen_files file ;;
        *) return 1 ;;
    esac
}
# <<< image flags

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
    local global_opts='--data --config -h --help'
    local remove_opts="-o --out $_cutout_image_opts -c --concurrency --model --include-outputs --skip-existing --overwrite --json --review-below --key
        -q --quiet --no-progress --recursive --store --inference-workers --inference-threads
        --manifest --force --watch --exclude --dry-run"
    local serve_opts='--host --port --base-url --workers --queue-limit --sync-timeout --rate-limit
        --result-ttl --callback-backoff --allow-private-network --no-playground --no-removebg --no-photoroom --no-clipdrop --no-metrics --metrics-port --metrics-host --log-level --store --lease-ms
        --results --results-path-style --results-redirect
        --no-exit-with-parent --preload --model --upstream --upstream-model --upstream-token --precision --inference-workers --inference-threads'
    local model_server_opts='--host --port --model --precision --token --inference-workers --inference-threads'
    # Options that take a value, so the word after them is not a command or an input
    local value_opts=" --data --config -o --out$_cutout_image_value_opts-c --concurrency --model --key
        --precision --host --port --base-url --workers --queue-limit --sync-timeout --rate-limit
        --result-ttl --callback-backoff --metrics-port --metrics-host --log-level --name --account --store --lease-ms --upstream --upstream-model --upstream-token --token --triton --url
        --inference-workers --inference-threads --manifest --exclude --results --review-below "
    value_opts=${value_opts//$'\n'/ } # one line, so that " $word " finds a flag at a line's end

    # Values of the option before the cursor
    _cutout_image_value "$prev" && return
    case $prev in
        --precision) COMPREPLY=($(compgen -W 'auto fp32 int8' -- "$cur")); return ;;
        --log-level) COMPREPLY=($(compgen -W 'trace debug info warn error fatal silent' -- "$cur")); return ;;
        --data | --triton) _cutout_compgen_files directory; return ;;
        --config | -o | --out | --model | --manifest) _cutout_compgen_files file; return ;;
        -c | --concurrency | --key | --host | --port | --base-url | --workers | --queue-limit | \
            --sync-timeout | --rate-limit | --result-ttl | --callback-backoff | --name | --account | --store | --lease-ms | --results | \
            --upstream | --upstream-model | --upstream-token | --token | --inference-workers | --inference-threads | --exclude)
            return ;;
    esac

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

    local opts=''
    case $cmd in
        '')
            if [[ $cur == -* ]]; then
                COMPREPLY=($(compgen -W "$remove_opts $global_opts -V --version" -- "$cur"))
            else
                COMPREPLY=($(compgen -W "$commands" -- "$cur"))
                _cutout_compgen_files file
            fi
            return
            ;;
        remove)
            if [[ $cur == -* ]]; then
                COMPREPLY=($(compgen -W "$remove_opts $global_opts" -- "$cur"))
            else
                _cutout_compgen_files file
            fi
            return
            ;;
        serve) opts=$serve_opts ;;
        health) opts='--url' ;;
        model-server) opts=$model_server_opts ;;
        keys)
            case $sub in
                '') [[ $cur != -* ]] && COMPREPLY=($(compgen -W 'create list revoke' -- "$cur")) ;;
                create) opts='--name --test --account --json --store' ;;
                list) opts='--json --store' ;;
                revoke) opts='--store' ;;
            esac
            ;;
        credits) [[ -z $sub && $cur != -* ]] && COMPREPLY=($(compgen -W 'add' -- "$cur")); opts='--store' ;;
        account | usage) opts='--key --json --store' ;;
        models)
            case $sub in
                '') [[ $cur != -* ]] && COMPREPLY=($(compgen -W 'list verify pull export' -- "$cur")) ;;
                list | verify) opts='--json' ;;
                pull) opts='--no-variants' ;;
                export) opts='--triton --no-variants' ;;
            esac
            ;;
        completion) [[ -z $sub && $cur != -* ]] && COMPREPLY=($(compgen -W 'bash zsh fish' -- "$cur")) ;;
        help) [[ -z $sub && $cur != -* ]] && COMPREPLY=($(compgen -W "$commands" -- "$cur")) ;;
    esac

    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$opts $global_opts" -- "$cur"))
    fi
}

complete -F _cutout cutout
