#!/bin/bash
# shellcheck shell=bash
# devstack plugin of mlaccel: enables its Nova scheduler filter and weighers
# and its state bus, wraps cinder's backends in its mirror-volume driver
# (with its Cinder weigher), runs mlaccel-agent beside every nova-compute
# and, where enabled, the warm-pool manager mlaccel-pool-manager, prepares
# the task daemon for guest images and configures tempest for the mlaccel
# tempest plugin.

# Save trace setting
_XTRACE_MLACCEL=$(set +o | grep xtrace)
set -o xtrace

function _mlaccel_bin {
    local prefix
    prefix=${MLACCEL_BIN_DIR:-$(get_python_exec_prefix)}
    echo "$prefix/$1"
}

function install_mlaccel {
    setup_develop "$MLACCEL_DIR"
}

# The host name nova-compute reports under (its [DEFAULT] host, else the
# machine's name): the name a host key signs for.
function _mlaccel_compute_host {
    local host
    host=$(iniget "$NOVA_CONF" DEFAULT host)
    echo "${host:-$(hostname)}"
}

# The host names this node publishes reports for: nova-compute's, and
# host@backend of each cinder backend the mirror-volume driver wraps.
function _mlaccel_report_hosts {
    if is_service_enabled n-cpu; then
        _mlaccel_compute_host
    fi
    if is_service_enabled c-vol; then
        local host section
        host=$(iniget "$CINDER_CONF" DEFAULT host)
        host=${host:-$(hostname)}
        for section in $(_mlaccel_cinder_mirror_backends); do
            echo "$host@$section"
        done
    fi
}

# Host reports are signed, and readers use no others: readers (the
# schedulers) hold the deployment key, each node only its own hosts' keys,
# derived from it. Keys are made once and kept across re-stacks.
function configure_mlaccel_statebus_keys {
    local deployment=$MLACCEL_STATEBUS_DEPLOYMENT_KEY_FILE
    local host=$MLACCEL_STATEBUS_HOST_KEY_FILE
    local statebus
    statebus=$(_mlaccel_bin mlaccel-statebus)
    sudo install -d -m 0700 -o "$STACK_USER" "$(dirname "$deployment")" \
        "$(dirname "$host")"
    if is_service_enabled n-sch c-sch && [[ ! -f $deployment ]]; then
        "$statebus" keygen --output "$deployment"
    fi
    local hosts=() name
    for name in $(_mlaccel_report_hosts); do
        hosts+=(--host "$name")
    done
    if [[ ${#hosts[@]} -gt 0 && ! -f $host ]]; then
        if [[ ! -f $deployment ]]; then
            die $LINENO "no host key $host: make it where the deployment" \
                "key is (mlaccel-statebus derive ${hosts[*]}) and copy" \
                "it here"
        fi
        "$statebus" derive --deployment-key-file "$deployment" \
            "${hosts[@]}" --output "$host"
    fi
    # Where publishers keep the sequence numbers they sign, one directory
    # per service.
    sudo install -d -m 0700 -o "$STACK_USER" "$MLACCEL_PUBLISHER_STATE_DIR"
}

function configure_mlaccel {
    if [[ $MLACCEL_STATEBUS_URL == file://* ]]; then
        mkdir -p "${MLACCEL_STATEBUS_URL#file://}"
    fi
    configure_mlaccel_statebus_keys
    # nova.conf is also the base of the computes' nova-cpu.conf; enable
    # turns on the versioned notifications the launcher's records use.
    local args=(enable --nova-conf "$NOVA_CONF"
                --statebus-url "$MLACCEL_STATEBUS_URL")
    if is_service_enabled n-sch c-sch; then
        args+=(--statebus-deployment-key-file
               "$MLACCEL_STATEBUS_DEPLOYMENT_KEY_FILE")
    fi
    if is_service_enabled n-cpu c-vol; then
        args+=(--statebus-host-key-file "$MLACCEL_STATEBUS_HOST_KEY_FILE")
    fi
    if is_service_enabled c-vol; then
        args+=(--cinder-conf "$CINDER_CONF")
        local section
        for section in $(_mlaccel_cinder_mirror_backends); do
            args+=(--cinder-mirror-backend "$section")
        done
    fi
    "$(_mlaccel_bin mlaccel-config)" "${args[@]}"
    if is_service_enabled c-vol; then
        iniset "$CINDER_CONF" mlaccel_statebus publisher_state_dir \
            "$MLACCEL_PUBLISHER_STATE_DIR/cinder-volume"
    fi
}

# The cinder backend sections the mirror-volume driver wraps: those named
# in MLACCEL_CINDER_MIRROR_BACKENDS, by default every enabled backend; none
# unless MLACCEL_CINDER_MIRROR is True.
function _mlaccel_cinder_mirror_backends {
    if [[ $MLACCEL_CINDER_MIRROR != "True" ]]; then
        return
    fi
    local backends=$MLACCEL_CINDER_MIRROR_BACKENDS
    if [[ -z $backends ]]; then
        backends=$(iniget "$CINDER_CONF" DEFAULT enabled_backends)
    fi
    echo "${backends//,/ }"
}

# The mirror-volume tests listen to Cinder's notifications where Cinder
# sends them.
function configure_tempest_mlaccel_cinder {
    if [[ -z $(_mlaccel_cinder_mirror_backends) ]]; then
        return
    fi
    local url
    url=$(iniget "$CINDER_CONF" oslo_messaging_notifications transport_url)
    url=${url:-$(iniget "$CINDER_CONF" DEFAULT transport_url)}
    iniset "$TEMPEST_CONFIG" mlaccel cinder_notification_url "$url"
}

# mlaccel-agent reads nova-compute's own configuration for its host name,
# image cache and notification transport; only the state bus, the host key
# and the cloud it reads Glance with are its own.
function configure_mlaccel_agent {
    local conf=$MLACCEL_AGENT_CONF
    sudo install -d -m 0755 -o "$STACK_USER" "$(dirname "$conf")"
    iniset "$conf" mlaccel_agent nova_config_files "$MLACCEL_AGENT_NOVA_CONF"
    iniset "$conf" mlaccel_agent cloud "$MLACCEL_AGENT_CLOUD"
    iniset "$conf" mlaccel_statebus backend_url "$MLACCEL_STATEBUS_URL"
    iniset "$conf" mlaccel_statebus host_key_file \
        "$MLACCEL_STATEBUS_HOST_KEY_FILE"
    iniset "$conf" mlaccel_statebus publisher_state_dir \
        "$MLACCEL_PUBLISHER_STATE_DIR/agent"
}

function start_mlaccel_agent {
    run_process mlaccel-agent \
        "$(_mlaccel_bin mlaccel-agent) --config-file $MLACCEL_AGENT_CONF"
}

function stop_mlaccel_agent {
    stop_process mlaccel-agent
}

function _mlaccel_agent_enabled {
    is_service_enabled n-cpu && is_service_enabled mlaccel-agent
}

# mlaccel-pool-manager keeps the warm pools of MLACCEL_POOL_CLOUD's project.
# Its configuration is also the launchers': "mlaccel launch --config-file
# $MLACCEL_POOL_CONF" claims from the pools it keeps. The file names Nova's
# notification transport (a password), so it is private like the state.
function configure_mlaccel_pool_manager {
    local conf=$MLACCEL_POOL_CONF
    if [[ -z $MLACCEL_POOL_CALLBACK_HOST ]]; then
        die $LINENO "set MLACCEL_POOL_CALLBACK_HOST to an address of this" \
            "node that the VMs reach"
    fi
    sudo install -d -m 0755 -o "$STACK_USER" "$(dirname "$conf")"
    sudo install -d -m 0700 -o "$STACK_USER" "$MLACCEL_POOL_STATE_DIR"
    if [[ ! -f $conf ]]; then
        sudo install -m 0600 -o "$STACK_USER" /dev/null "$conf"
    fi
    local url
    url=$(iniget "$NOVA_CONF" oslo_messaging_notifications transport_url)
    url=${url:-$(iniget "$NOVA_CONF" DEFAULT transport_url)}
    iniset "$conf" mlaccel_pool state_dir "$MLACCEL_POOL_STATE_DIR"
    iniset "$conf" mlaccel_pool leader_lease "$MLACCEL_POOL_LEADER_LEASE"
    iniset "$conf" mlaccel_statebus backend_url "$MLACCEL_STATEBUS_URL"
    iniset "$conf" mlaccel_launcher callback_host \
        "$MLACCEL_POOL_CALLBACK_HOST"
    if [[ -n $url ]]; then
        iniset "$conf" mlaccel_launcher notification_url "$url"
    fi
}

function start_mlaccel_pool_manager {
    run_process mlaccel-pool-manager \
        "$(_mlaccel_bin mlaccel-pool-manager) --config-file $MLACCEL_POOL_CONF --cloud $MLACCEL_POOL_CLOUD"
}

function stop_mlaccel_pool_manager {
    stop_process mlaccel-pool-manager
}

function install_mlaccel_guest_files {
    # The unit that the diskimage-builder element installs in guest images,
    # and the user-data that configures and starts it on any image.
    local guest=$MLACCEL_CONF_DIR/guest
    sudo install -d -m 0755 "$guest"
    "$(_mlaccel_bin python)" -m mlaccel.taskd.guest unit | \
        sudo tee "$guest/mlaccel-taskd.service" > /dev/null
    "$(_mlaccel_bin python)" -c \
        'import sys; from mlaccel.taskd import guest; sys.stdout.write(guest.user_data())' | \
        sudo tee "$guest/user-data.yaml" > /dev/null
}

function configure_tempest_mlaccel {
    iniset "$TEMPEST_CONFIG" service_available mlaccel True
    iniset "$TEMPEST_CONFIG" mlaccel statebus_url "$MLACCEL_STATEBUS_URL"
    # Tempest's multinode tests run only for the filters nova has enabled.
    local filters
    filters=$(iniget "$NOVA_CONF" filter_scheduler enabled_filters)
    if [[ -n $filters ]]; then
        iniset "$TEMPEST_CONFIG" compute-feature-enabled \
            scheduler_enabled_filters "$filters"
    fi
}

function cleanup_mlaccel {
    if [[ $MLACCEL_STATEBUS_URL == file://* ]]; then
        rm -rf "${MLACCEL_STATEBUS_URL#file://}"
    fi
    sudo rm -rf "$MLACCEL_CONF_DIR/guest" "$MLACCEL_AGENT_CONF" \
        "$MLACCEL_POOL_CONF" "$MLACCEL_POOL_STATE_DIR" \
        "$MLACCEL_STATEBUS_DEPLOYMENT_KEY_FILE" \
        "$MLACCEL_STATEBUS_HOST_KEY_FILE" "$MLACCEL_PUBLISHER_STATE_DIR"
    sudo rmdir "$MLACCEL_STATEBUS_KEY_DIR" 2> /dev/null || true
}

if is_service_enabled mlaccel; then
    if [[ "$1" == "stack" && "$2" == "install" ]]; then
        echo_summary "Installing mlaccel"
        install_mlaccel
    elif [[ "$1" == "stack" && "$2" == "post-config" ]]; then
        echo_summary "Enabling mlaccel in nova"
        configure_mlaccel
    elif [[ "$1" == "stack" && "$2" == "extra" ]]; then
        if _mlaccel_agent_enabled; then
            echo_summary "Starting mlaccel-agent"
            configure_mlaccel_agent
            start_mlaccel_agent
        fi
        if [[ $MLACCEL_GUEST_TASKD == "True" ]]; then
            echo_summary "Preparing the mlaccel task daemon for guests"
            install_mlaccel_guest_files
        fi
        if is_service_enabled mlaccel-pool-manager; then
            echo_summary "Starting mlaccel-pool-manager"
            configure_mlaccel_pool_manager
            start_mlaccel_pool_manager
        fi
    elif [[ "$1" == "stack" && "$2" == "test-config" ]]; then
        if is_service_enabled tempest; then
            echo_summary "Configuring tempest for mlaccel"
            configure_tempest_mlaccel
            if is_service_enabled c-vol; then
                configure_tempest_mlaccel_cinder
            fi
        fi
    fi

    if [[ "$1" == "unstack" ]]; then
        if _mlaccel_agent_enabled; then
            stop_mlaccel_agent
        fi
        if is_service_enabled mlaccel-pool-manager; then
            stop_mlaccel_pool_manager
        fi
    fi

    if [[ "$1" == "clean" ]]; then
        cleanup_mlaccel
    fi
fi

# Restore xtrace
$_XTRACE_MLACCEL
