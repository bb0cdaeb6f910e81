# fish completion for cutout
#
# Install: copy this file to ~/.config/fish/completions/cutout.fish, or run:
#   cutout completion fish | source

set -l __cutout_commands remove serve model-server keys credits account usage models openapi health completion help

# Prints the command being completed: nothing before one is typed, `remove` when the first word
# is an input (`cutout photo.jpg` means `cutout remove photo.jpg`). Values of options are skipped.
function __cutout_command
    set -l words (commandline -opc)
    set -e words[1]
    set -l skip 0
    for word in $words
        if test $skip -eq 1
            set skip 0
            continue
        end
        if contains -- $word $__cutout_image_value_opts
            set skip 1
            continue
        end
        switch $word
            case --data --config -o --out -c --concurrency --model --key --precision \
                --host --port --base-url --workers --queue-limit --sync-timeout --rate-limit --result-ttl \
                --callback-backoff --log-level --name --account --store --lease-ms --upstream --upstream-model --upstream-token --token --triton \
                --inference-workers --inference-threads --results
                set skip 1
            case '-*'
            case remove serve model-server keys credits account usage models openapi health completion help
                echo $word
                return
            case '*'
                echo remove
                return
        end
    end
end

# True when the command being completed is one of the arguments
function __cutout_is
    set -l cmd (__cutout_command)
    contains -- "$cmd" $argv
end

function __cutout_no_command
    set -l cmd (__cutout_command)
    test -z "$cmd"
end

function __cutout_removing
    set -l cmd (__cutout_command)
    test -z "$cmd"; or test "$cmd" = remove
end

complete -c cutout -e

# Global options, on every command
complete -c cutout -l data -x -a '(__fish_complete_directories)' -d 'Data directory (database and results)'
complete -c cutout -l config -r -F -d 'Configuration file'
complete -c cutout -s h -l help -d 'Show help'
complete -c cutout -n __cutout_no_command -s V -l version -d 'Show the version'

# Commands
complete -c cutout -n __cutout_no_command -a remove -d 'Remove backgrounds locally (default)'
complete -c cutout -n __cutout_no_command -a serve -d 'Run the v1 HTTP API'
complete -c cutout -n __cutout_no_command -a model-server -d 'Serve the model over the Open Inference Protocol v2'
complete -c cutout -n __cutout_no_command -a keys -d 'Create, list and revoke API keys'
complete -c cutout -n __cutout_no_command -a credits -d 'Add purchased credits'
complete -c cutout -n __cutout_no_command -a account -d 'Credit balance and plan'
complete -c cutout -n __cutout_no_command -a usage -d 'Credits used per day'
complete -c cutout -n __cutout_no_command -a models -d 'List, verify and pull models'
complete -c cutout -n __cutout_no_command -a openapi -d 'Print the OpenAPI 3.1.0 document'
complete -c cutout -n __cutout_no_command -a health -d "Ask a running server's /readyz (exit 0 when ready)"
complete -c cutout -n __cutout_no_command -a completion -d 'Print a shell completion script'
complete -c cutout -n __cutout_no_command -a help -d 'Show help for a command'

# remove (also without the word `remove`): inputs are files, so file completion stays on
set -l rm __cutout_removing
complete -c cutout -n $rm -s o -l out -r -F -d 'Output directory or file; - for stdout'
# >>> image flags: written from the options table (src/options.ts) by `npm run completions`; do not edit
# The image flags that take a value, skipped by __cutout_command
set -g __cutout_image_value_opts --size --format --bg-color --quality --precision --alpha --crop-margin --roi --scale --position --bg-image
complete -c cutout -n __cutout_removing -l size -x -a 'preview full auto' -d 'Output size'
complete -c cutout -n __cutout_removing -l format -x -a 'png webp jpg auto zip' -d 'Output encoding'
complete -c cutout -n __cutout_removing -l bg-color -x -a 'transparent' -d 'Background: transparent, a hex colour or a CSS name'
complete -c cutout -n __cutout_removing -l crop -d 'Crop to the subject\'s bounding box'
complete -c cutout -n __cutout_removing -l quality -x -a 'fast balanced best max' -d 'Speed against quality'
complete -c cutout -n __cutout_removing -l precision -x -a 'auto fp32 int8' -d 'Model number format (int8 on VNNI CPUs)'
complete -c cutout -n __cutout_removing -l mask -d 'Write the alpha matte alone'
complete -c cutout -n __cutout_removing -l alpha -x -a 'soft hard' -d 'Soft matte, or hard (thresholded) for stickers and icons'
complete -c cutout -n __cutout_removing -l no-refine -d 'Plain bilinear matte, no guided refinement'
complete -c cutout -n __cutout_removing -l no-decontaminate -d 'Keep the original colours at soft edges'
complete -c cutout -n __cutout_removing -l crop-margin -x -d 'Margin around the crop, px or %'
complete -c cutout -n __cutout_removing -l roi -x -d 'Only this rectangle may hold the subject: x1 y1 x2 y2'
complete -c cutout -n __cutout_removing -l scale -x -a 'original' -d 'Share of the canvas the subject fills'
complete -c cutout -n __cutout_removing -l position -x -a 'original center' -d 'Where the subject goes'
complete -c cutout -n __cutout_removing -l bg-image -r -F -d 'Background picture: a file or URL'
complete -c cutout -n __cutout_removing -l shadow -d 'Accepted for remove.bg compatibility; no shadow is drawn'
# <<< image flags
complete -c cutout -n $rm -s c -l concurrency -x -d 'Images processed at once'
complete -c cutout -n $rm -l inference-workers -x -d 'Inference worker threads, each with its own session'
complete -c cutout -n $rm -l inference-threads -x -d 'Intra-op threads of each session'
complete -c cutout -n $rm -l model -r -F -d 'Model name or .onnx file'
complete -c cutout -n $rm -l review-below -r -d 'Flag cutouts whose confidence is below T (0..1)'
complete -c cutout -n $rm -l include-outputs -d 'Take named files like x.cutout.png as inputs too'
complete -c cutout -n $rm -l skip-existing -d 'Skip inputs whose output exists'
complete -c cutout -n $rm -l overwrite -d 'Overwrite existing outputs'
complete -c cutout -n $rm -l json -d 'One JSON object per input on stdout'
complete -c cutout -n $rm -l key -x -d "Charge this API key's credits"
complete -c cutout -n $rm -s q -l quiet -d 'No spinner or progress bar'
complete -c cutout -n $rm -l no-progress -d 'No spinner or progress bar'
complete -c cutout -n $rm -l recursive -d 'Descend into directories'
complete -c cutout -n $rm -l manifest -r -F -d 'JSON-lines record; a rerun skips unchanged inputs'
complete -c cutout -n $rm -l force -d 'With --manifest: redo every input'
complete -c cutout -n $rm -l watch -d 'Keep watching the input folders for new images'
complete -c cutout -n $rm -l exclude -x -d 'Leave out matching inputs (repeatable)'
complete -c cutout -n $rm -l dry-run -d 'Print what would be processed and skipped; write nothing'

# serve
set -l serve '__cutout_is serve'
complete -c cutout -n $serve -l host -x -a '(__fish_print_hostnames)' -d 'Bind address'
complete -c cutout -n $serve -l port -x -d 'Port; 0 picks a free one'
complete -c cutout -n $serve -l preload -d 'Load the model before listening'
complete -c cutout -n $serve -l base-url -x -d 'Base URL of result URLs'
complete -c cutout -n $serve -l workers -x -d 'Inference jobs run at once'
complete -c cutout -n $serve -l inference-workers -x -d 'Inference worker threads, each with its own session'
complete -c cutout -n $serve -l inference-threads -x -d 'Intra-op threads of each session'
complete -c cutout -n $serve -l queue-limit -x -d 'Jobs waiting before 503'
complete -c cutout -n $serve -l sync-timeout -x -d 'Sync hard timeout (ms)'
complete -c cutout -n $serve -l rate-limit -x -d 'Requests per minute per key'
complete -c cutout -n $serve -l result-ttl -x -d 'Result retention (seconds)'
complete -c cutout -n $serve -l callback-backoff -x -d 'First callback retry delay (ms)'
complete -c cutout -n $serve -l allow-private-network -d 'Let URLs reach private addresses'
complete -c cutout -n $serve -l no-playground -d 'Do not serve the playground page'
complete -c cutout -n $serve -l no-removebg -d "Do not answer remove.bg's and rembg's APIs"
complete -c cutout -n $serve -l no-photoroom -d "Do not answer Photoroom's API"
complete -c cutout -n $serve -l no-clipdrop -d "Do not answer Clipdrop's API"
complete -c cutout -n $serve -l no-metrics -d 'Do not serve /metrics'
complete -c cutout -n $serve -l no-exit-with-parent -d 'Keep serving when the parent process exits'
complete -c cutout -n $serve -l metrics-port -x -d 'Serve /metrics on a listener of its own'
complete -c cutout -n $serve -l metrics-host -x -d 'Bind address of the metrics listener'
complete -c cutout -n $serve -l log-level -x -a 'trace debug info warn error fatal silent' -d 'Request log level'
complete -c cutout -n $serve -l lease-ms -x -d 'How long a claimed job stays with a silent server (ms)'
complete -c cutout -n $serve -l results -x -d 'Object store for results, s3://BUCKET[/PREFIX]'
complete -c cutout -n $serve -l results-path-style -d 'Path-style addressing for the object store'
complete -c cutout -n $serve -l results-redirect -d 'Answer result reads with a presigned URL'
complete -c cutout -n '__cutout_is remove serve keys credits account usage' -l store -x -d 'PostgreSQL URL shared by a fleet'
complete -c cutout -n $serve -l model -r -F -d 'Model name or .onnx file'
complete -c cutout -n $serve -l upstream -x -d 'Open Inference Protocol server that runs the model'
complete -c cutout -n $serve -l upstream-model -x -d "The model's name on the upstream"
complete -c cutout -n $serve -l upstream-token -x -d 'Bearer token sent to the upstream'
complete -c cutout -n $serve -l precision -x -a 'auto fp32 int8' -d 'Default model number format (int8: NAME-int8 upstream)'
complete -c cutout -n $serve -f

# model-server
set -l mserver '__cutout_is model-server'
complete -c cutout -n $mserver -l host -x -a '(__fish_print_hostnames)' -d 'Bind address'
complete -c cutout -n $mserver -l port -x -d 'Port; 0 picks a free one'
complete -c cutout -n $mserver -l model -r -F -d 'Model name or .onnx file'
complete -c cutout -n $mserver -l precision -x -a 'auto fp32 int8' -d 'Models served: fp32 as NAME, int8 as NAME-int8'
complete -c cutout -n $mserver -l token -x -d 'Bearer token required on all but /v2/health'
complete -c cutout -n $mserver -l inference-workers -x -d 'Inference worker threads, each with its own session'
complete -c cutout -n $mserver -l inference-threads -x -d 'Intra-op threads of each session'
complete -c cutout -n $mserver -f

# keys create|list|revoke
set -l keys '__cutout_is keys'
complete -c cutout -n "$keys; and not __fish_seen_subcommand_from create list revoke" -f -a create -d 'Create a key'
complete -c cutout -n "$keys; and not __fish_seen_subcommand_from create list revoke" -f -a list -d 'List keys'
complete -c cutout -n "$keys; and not __fish_seen_subcommand_from create list revoke" -f -a revoke -d 'Revoke a key'
complete -c cutout -n "$keys; and __fish_seen_subcommand_from create" -l name -x -d 'Name of the key'
complete -c cutout -n "$keys; and __fish_seen_subcommand_from create" -l test -d 'Create a test key'
complete -c cutout -n "$keys; and __fish_seen_subcommand_from create" -l account -x -d 'Add the key to this account'
complete -c cutout -n "$keys; and __fish_seen_subcommand_from create list" -l json -d 'Print JSON'
complete -c cutout -n $keys -f

# credits add
complete -c cutout -n '__cutout_is credits; and not __fish_seen_subcommand_from add' -f -a add -d 'Add purchased credits'
complete -c cutout -n '__cutout_is credits' -f

# account, usage
set -l acct '__cutout_is account usage'
complete -c cutout -n $acct -l key -x -d 'API key'
complete -c cutout -n $acct -l json -d 'Print JSON'
complete -c cutout -n $acct -f

# models list|verify|pull|export
set -l models '__cutout_is models'
complete -c cutout -n "$models; and not __fish_seen_subcommand_from list verify pull export" -f -a list -d 'Known models'
complete -c cutout -n "$models; and not __fish_seen_subcommand_from list verify pull export" -f -a verify -d 'Check presence and checksums'
complete -c cutout -n "$models; and not __fish_seen_subcommand_from list verify pull export" -f -a pull -d 'Assemble a model and build its quality variants'
complete -c cutout -n "$models; and not __fish_seen_subcommand_from list verify pull export" -f -a export -d 'Write a Triton model repository'
complete -c cutout -n "$models; and __fish_seen_subcommand_from list verify" -l json -d 'Print JSON'
complete -c cutout -n "$models; and __fish_seen_subcommand_from pull export" -l no-variants -d 'Skip the quality variants'
complete -c cutout -n "$models; and __fish_seen_subcommand_from export" -l triton -x -a '(__fish_complete_directories)' -d 'The Triton model repository to write'
complete -c cutout -n $models -f

# openapi
complete -c cutout -n '__cutout_is openapi' -f

# health
complete -c cutout -n '__cutout_is health' -f
complete -c cutout -n '__cutout_is health' -l url -x -d "The server's base URL"

# completion bash|zsh|fish
set -l comp '__cutout_is completion'
complete -c cutout -n "$comp; and not __fish_seen_subcommand_from bash zsh fish" -f -a 'bash zsh fish' -d Shell
complete -c cutout -n $comp -f

# help <command>
complete -c cutout -n '__cutout_is help' -f -a "$__cutout_commands"
